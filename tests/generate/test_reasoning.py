"""Splitting a reasoning model's response into trace and answer."""

import pytest

from cuset.generate.reasoning import split_reasoning


@pytest.mark.parametrize("text, field, reasoning, answer, unterminated", [
    ("plain answer", None, None, "plain answer", False),
    ("  <think>plan</think>\nanswer", None, "plan", "\nanswer", False),
    ("plan opened by the template</think>answer", None, "plan opened by the template", "answer", False),
    ("<think>still thinking when the tokens ran out", None, "still thinking when the tokens ran out", "", True),
    ("answer", "a separate trace", "a separate trace", "answer", False),
    ("<think>inline too</think>answer", "field", "field\ninline too", "answer", False),
    ("text mentioning <think> later", None, None, "text mentioning <think> later", False),  # not a leading trace
    ("", None, None, "", False),
])
def test_split(text, field, reasoning, answer, unterminated):
    split = split_reasoning(text, field)
    assert (split.reasoning, split.answer, split.unterminated) == (reasoning, answer, unterminated)
