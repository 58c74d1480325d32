"""Splitting a reasoning model's response into trace and answer."""

import json

import pytest

from cuset.tasks.reasoning import split_reasoning


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


class _WordGenerator:
    """A backend answering every request with one inline-trace response; its 'tokenizer' counts words."""
    model_name = "words"

    def __init__(self, text):
        self.text = text

    def count_tokens(self, text):
        return len(text.split())

    def generate(self, requests):
        from cuset.generate.backends.interface import Completion
        for req in requests:
            yield req, Completion(self.text, len(self.text.split()), "stop", 0.0)


def test_inline_trace_tokens_are_counted_with_the_backends_tokenizer(tmp_path, make_record):
    from cuset.config import load_config
    from cuset.generate.config import GenerateConfig
    from cuset.generate.records import load_generations
    from cuset.generate.run import generate_file

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(make_record(0)) + "\n")
    cfg = load_config(GenerateConfig, None, [f"tasks={tasks}", f"out={tmp_path / 'g.jsonl'}", "n_samples=1",
                                             "progress=false"])
    text = ("<think>one two three ```cuda\n__global__ void draft() {}\n```</think>\n"
            "```cuda\n__global__ void k() {}\n```")
    generate_file(cfg, _WordGenerator(text))
    (rec,) = load_generations(cfg.out)
    # trace "one two three ```cuda\n__global__ void draft() {}\n```": 9 words (one two three ```cuda __global__ void draft() {} ```)
    assert rec.reasoning_tokens == 9 and rec.reasoning.startswith("one two three")
    assert "draft" not in rec.code and "void k()" in rec.code
