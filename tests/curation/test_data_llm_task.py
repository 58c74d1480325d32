import json

import pytest

from cuset.curation.checker import tolerance
from cuset.curation.llm_task import PROMPT_VERSION, REPLY_FIELDS, ReplyRejected, build_messages, parse_reply_json, reply_to_task
from cuset.curation.records import Candidate

from conftest import FIXTURES
from llm_fakes import CANNED

CODE = (FIXTURES / "cuda_mixed" / "row_sum.cu").read_text()
CAND = Candidate("abcd1234abcd1234", "code", "gh", "row_sum.cu", CODE)


def good(**changes) -> dict:
    reply = {**CANNED["row_sum"], "bench_cu": CODE}
    reply.update(changes)
    return reply


def test_messages_carry_the_contract_and_the_program():
    system, user = build_messages(CAND)
    assert system["role"] == "system" and PROMPT_VERSION in system["content"]
    for key in REPLY_FIELDS:
        assert f'"{key}"' in system["content"]
    assert "CUSET_CASE" in system["content"] and "data/y_ref.bin" in system["content"]
    assert user["content"].startswith("Source: row_sum.cu\nProgram:\n```cuda\n") and CODE in user["content"]
    pair = Candidate("k", "pair", "p", "pairs.jsonl:1", CODE, prompt="Sum the rows.")
    assert "The program answers this request:\nSum the rows.\n" in build_messages(pair)[1]["content"]


def test_a_good_reply_becomes_a_task_with_our_checker():
    task = reply_to_task(json.dumps(good()), CAND, 7)
    assert (task.id, task.task_name, task.family) == (7, "Row_Sum", "reduction")
    assert task.task_description == "Compute the Row_Sum kernel on GPU using CUDA."
    assert [s.to_json() for s in task.outputs] == [{"name": "sums", "dtype": "float32", "shape": "(64,)"}]
    assert task.bench_cu == CODE and "CUSET_CASE" in task.gen_py
    tol = tolerance("float32", 1024)
    assert f'ok = check("sums", np.float32, 64, {tol!r}, {tol!r})' in task.compare_py


@pytest.mark.parametrize("content", [
    "```json\n" + json.dumps(good()) + "\n```",
    "Here is the task:\n" + json.dumps(good()) + "\nHope this helps.",
])
def test_fenced_or_wrapped_json_is_accepted(content):
    assert reply_to_task(content, CAND, 1).task_name == "Row_Sum"


def test_unknown_family_becomes_other():
    assert reply_to_task(json.dumps(good(family="Linear Algebra")), CAND, 1).family == "other"


@pytest.mark.parametrize("content, reason, detail", [
    ("I cannot help with that.", "bad_json", "no complete JSON object"),
    ('{"task_name": "x",', "bad_json", "Expecting property name"),  # cut short
    ('{"task_name": "x", }', "bad_json", "Expecting property name"),
    ("[1, 2]", "bad_json", "no complete JSON object"),
    (json.dumps({k: v for k, v in good().items() if k not in ("gen_py", "family")}), "missing_field", "missing family, gen_py"),
    (json.dumps(good(reduction_depth="1024")), "bad_type", "reduction_depth must be a int"),
    (json.dumps(good(reduction_depth=True)), "bad_type", "reduction_depth"),
    (json.dumps(good(inputs="m")), "bad_type", "inputs"),
    (json.dumps(good(reduction_depth=0)), "bad_value", "reduction_depth must be >= 1"),
    (json.dumps(good(task_name="Row Sum")), "bad_name", "letters, digits and _"),
    (json.dumps(good(outputs=[])), "no_outputs", "declares no outputs"),
    (json.dumps(good(outputs=[{"name": "sums", "dtype": "float128", "shape": "(64,)"}])), "bad_dtype", "float128"),
    (json.dumps(good(outputs=[{"name": "sums", "dtype": "bfloat16", "shape": "(64,)"}])), "bad_dtype", "numpy"),
    (json.dumps(good(outputs=[{"name": "sums", "dtype": "float32", "shape": "64 values"}])), "bad_shape", "unparsable"),
    (json.dumps(good(outputs=[{"name": "m", "dtype": "float32", "shape": "(64,)"}])), "name_clash", "name of an input"),
    (json.dumps(good(outputs=[{"name": "m_ref", "dtype": "float32", "shape": "(64,)"}])), "name_clash", "reference"),
    (json.dumps(good(bench_cu="int main() { return 0; }")), "no_kernel", "no __global__"),
    (json.dumps(good(bench_cu="__global__ void row_sum(float* m) {}")), "no_main", "no main()"),
    (json.dumps(good(bench_cu="__global__ void other(float* m) {}\nint main() {}")), "kernels_dropped", "row_sum"),
    (json.dumps(good(gen_py="import numpy as np\nx = (")), "gen_syntax_error", "gen_py line 2"),
    (json.dumps(good(gen_py="import numpy as np\nnp.zeros(3).tofile('data/m.bin')\nnp.zeros(3).tofile('data/sums_ref.bin')\n")),
     "gen_ignores_case", "CUSET_CASE"),
    (json.dumps(good(gen_py="import os\ncase = os.environ['CUSET_CASE']\n")), "gen_no_reference", "_ref.bin"),
    (json.dumps(good(level2_prompt=["a"])), "bad_type", "level2_prompt"),
])
def test_bad_replies_are_rejected_with_a_reason(content, reason, detail):
    with pytest.raises(ReplyRejected) as exc:
        reply_to_task(content, CAND, 1)
    assert exc.value.reason == reason
    assert detail in exc.value.detail


def test_parse_reply_json_takes_the_fenced_object():
    assert parse_reply_json('text ```json\n{"a": 1}\n``` more {"b": 2}') == {"a": 1}
