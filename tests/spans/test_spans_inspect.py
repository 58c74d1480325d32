"""`cuset inspect` and the cells it draws (cuset.spans.view)."""

from __future__ import annotations

import html as html_lib
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jsonl_tools import write_jsonl

from cuset.cli.main import app
from cuset.spans import CUSET_KINDS, Span, detect, token_kinds
from cuset.spans.view import SampleView, character_cells, to_html, token_cells

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "spans"
runner = CliRunner()


class _Cells(HTMLParser):
    """The <pre> of an inspect page: text of each token cell and its class/title."""

    def __init__(self):
        super().__init__()
        self.cells: list[tuple[str, str, str]] = []
        self._in_pre = False
        self._current = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "pre":
            self._in_pre = True
        elif tag == "span" and self._in_pre:
            self._current = [attrs.get("class", ""), attrs.get("title", ""), ""]

    def handle_endtag(self, tag):
        if tag == "pre":
            self._in_pre = False
        elif tag == "span" and self._current is not None:
            self.cells.append(tuple(self._current))
            self._current = None

    def handle_data(self, data):
        if self._current is not None:
            self._current[2] += data


def page_cells(page: str):
    parser = _Cells()
    parser.feed(page)
    return parser.cells


# ---------------------------------------------------------------- cells (pure)


def test_token_cells_weights_gaps_shared_characters_and_truncation():
    text = "PROMPT:ab cd\u00e9ef"
    #        0123456789...  response "ab cd\u00e9ef" starts at 7
    offsets = [(0, 0), (0, 7), (7, 9), (10, 12), (11, 13), (13, 14)]  # (10,12)/(11,13) share char 11
    supervised = [False, False, True, True, True, True]
    cuda = [False, False, True, False, True, True]
    kinds = [frozenset(), frozenset(), {"kernel_body"}, set(), {"kernel_body", "warp"}, {"launch_config"}]
    confidences = [None, None, 0.5, 0.05, 0.2, 0.01]
    cells = token_cells(text, offsets, supervised, cuda, kinds, lam=0.5, confidences=confidences, tau=0.1)
    got = [(c.text, c.token, c.supervised, c.weight, c.category) for c in cells]
    assert got == [
        ("", 0, False, None, "unsupervised"),          # special token, empty offsets
        ("PROMPT:", 1, False, None, "unsupervised"),
        ("ab", 2, True, 1.5, "both"),                  # p 0.5 > tau and CUDA: 1 + lambda
        (" ", None, False, None, "unsupervised"),      # no token covers character 9
        ("cd", 3, True, 0.0, "zero"),                  # p 0.05 <= tau, not CUDA
        ("\u00e9", 4, True, 1.5, "both"),              # shares 'd' with the previous token: shown once
        ("e", 5, True, 0.5, "cuda"),                   # p 0.01 <= tau, CUDA: lambda
        ("f", None, False, None, "unsupervised"),      # cut by truncation
    ]
    assert "".join(c.text for c in cells) == text


def test_character_cells_cut_at_span_boundaries():
    response = "int x; __global__ void k() { threadIdx.x; }"
    spans = detect(response)
    cells = character_cells(response, spans, lam=1.0)
    assert "".join(c.text for c in cells) == response
    assert [(c.text, c.weight, sorted(c.kinds)) for c in cells] == [
        ("int x; ", 0.0, []),
        ("__global__ void k() { ", 1.0, ["kernel_body"]),
        ("threadIdx.x", 1.0, ["kernel_body", "thread_index"]),
        ("; }", 1.0, ["kernel_body"]),
    ]


def test_html_is_self_contained_and_round_trips_the_text():
    response = (FIXTURES / "reduce_shared_shfl.cu").read_text()
    spans = detect(response)
    view = SampleView("reduce <&> 'x'", character_cells(response, spans, lam=1.0), lam=1.0, mode="characters",
                      spans=tuple(spans), response=response)
    page = to_html(view)
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page
    cells = page_cells(page)
    assert "".join(text for _, _, text in cells) == response
    assert "reduce &lt;&amp;&gt; &#x27;x&#x27;" in page
    # one row per span in the spans table, each naming its kind
    assert len(re.findall(r"<tr><td class='k-", page)) == len(spans)
    warp_cell = next(c for c in cells if c[2] == "__shfl_down_sync(FULL_MASK, val, offset)")
    assert "k-warp" in warp_cell[0] and "kinds: kernel_body, warp" in html_lib.unescape(warp_cell[1])


# ---------------------------------------------------------------- the command


def test_inspect_plain_file_without_tokenizer(tmp_path):
    out = tmp_path / "page.html"
    result = runner.invoke(app, ["inspect", str(FIXTURES / "kernel_only.cu"), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert "no tokenizer" in result.output and "in the CUDA mask" in result.output
    cells = page_cells(out.read_text())
    assert "".join(t for _, _, t in cells) == (FIXTURES / "kernel_only.cu").read_text()


@pytest.fixture
def tokenizer_dir(cuda_tokenizer, tmp_path):
    path = tmp_path / "tok"
    cuda_tokenizer.save_pretrained(path)
    return path


def _records(tmp_path) -> Path:
    path = tmp_path / "data.jsonl"
    program = (FIXTURES / "vector_add.cu").read_text()
    records = [
        {"prompt": "Add two vectors.", "completion": "```cuda\n" + program + "```\nDone."},
        {"messages": [{"role": "user", "content": "Tile a matmul."},
                      {"role": "assistant", "content": (FIXTURES / "tiled_matmul.cu").read_text()}]},
        {"prompt": "Nothing here."},
    ]
    return write_jsonl(path, records)


def test_inspect_record_with_tokenizer_shows_what_training_supervises(tmp_path, tokenizer_dir, cuda_tokenizer):
    from cuset.train.data import response_spans, tokenize_example

    data = _records(tmp_path)
    page = tmp_path / "r1.html"
    result = runner.invoke(app, ["inspect", str(data), "--index", "1", "--tokenizer", str(tokenizer_dir), "--html", str(page)])
    assert result.exit_code == 0, result.output

    response = (FIXTURES / "tiled_matmul.cu").read_text()
    spans = response_spans(response)
    encoded = tokenize_example(cuda_tokenizer, [{"role": "user", "content": "Tile a matmul."}], response,
                               max_length=4096, spans=spans)
    n_supervised = sum(label != -100 for label in encoded["labels"])
    n_cuda = int(sum(encoded["cuda_mask"]))
    assert 0 < n_cuda < n_supervised
    assert re.search(rf"supervised\s*\S\s*{n_supervised}\b", result.output)
    assert re.search(rf"in the CUDA mask\s*\S\s*{n_cuda} \(", result.output)

    cells = page_cells(page.read_text())
    assert "".join(t for _, _, t in cells) == encoded["text"]
    token_cells_ = [c for c in cells if "token #" in c[1]]
    assert len(token_cells_) == len(encoded["input_ids"])
    cuda_cells = [c for c in token_cells_ if c[0].startswith("cuda")]
    assert len(cuda_cells) == n_cuda  # without a model every CUDA token has weight lambda
    kinds = token_kinds(spans, encoded["offsets"], response_start=encoded["response_start"])
    assert sum("launch_config" in k for k in kinds) == sum("launch_config" in html_lib.unescape(c[1]) for c in token_cells_)


def test_inspect_truncated_sample_shows_the_cut(tmp_path, tokenizer_dir):
    page = tmp_path / "cut.html"
    result = runner.invoke(app, ["inspect", str(_records(tmp_path)), "--tokenizer", str(tokenizer_dir),
                                 "--max-length", "60", "--html", str(page)])
    assert result.exit_code == 0, result.output
    assert "Truncated to --max-length 60" in " ".join(result.output.split())
    cells = page_cells(page.read_text())
    assert sum("token #" in c[1] for c in cells) == 60
    assert cells[-1][0] == "u" and "Done." in cells[-1][2]  # the rest of the text, not supervised


def test_inspect_errors_name_the_record_and_the_fix(tmp_path, tokenizer_dir):
    data = _records(tmp_path)
    bad = runner.invoke(app, ["inspect", str(data), "--index", "2", "--no-html"])
    assert bad.exit_code == 2
    assert "data.jsonl:3: completion: missing" in " ".join(bad.output.split())
    past = runner.invoke(app, ["inspect", str(data), "--index", "9", "--no-html"])
    assert past.exit_code == 2 and "past the last record" in past.output
    missing = runner.invoke(app, ["inspect", str(tmp_path / "nope.cu"), "--no-html"])
    assert missing.exit_code == 2 and "no such file" in missing.output
    no_tok = runner.invoke(app, ["inspect", str(data), "--tokenizer", str(tmp_path / "absent"), "--no-html"])
    assert no_tok.exit_code == 2 and "--tokenizer" in no_tok.output


def test_inspect_with_a_model_gives_the_hybrid_weight_and_sample_weight(tmp_path):
    from cuset.train.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "tiny", [p.read_text() for p in sorted(FIXTURES.iterdir())],
                                 vocab_size=400, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1)
    page = tmp_path / "m.html"
    result = runner.invoke(app, ["inspect", str(FIXTURES / "histogram_atomics.cu"), "--model", str(model_dir),
                                 "--tau", "0.002", "--lambda", "0.5", "--html", str(page)])
    assert result.exit_code == 0, result.output
    match = re.search(r"sample weight w_n\s*\S\s*([0-9.]+)", result.output)
    assert match and 0.0 <= float(match.group(1)) <= 1.0

    # The expected weights computed apart from inspect's own path (its final hidden states
    # and LM head): the model's logits through transformers, p(token t | tokens before t),
    # weight 1[p > tau] + lambda * 1[CUDA mask] for every supervised token.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuset.train.data import response_spans
    from cuset.train.data.tokenize import tokenize_example

    response = (FIXTURES / "histogram_atomics.cu").read_text()
    encoded = tokenize_example(AutoTokenizer.from_pretrained(model_dir),
                               [{"role": "user", "content": "Write the CUDA program."}], response,
                               max_length=4096, spans=response_spans(response))
    ids = torch.tensor([encoded["input_ids"]])
    with torch.no_grad():
        probs = torch.softmax(AutoModelForCausalLM.from_pretrained(model_dir).eval()(ids).logits[0].double(), -1)
    confidence = {t: probs[t - 1, ids[0, t]].item() for t in range(1, ids.shape[1])}
    expected = {t: (1.0 if confidence[t] > 0.002 else 0.0) + (0.5 if encoded["cuda_mask"][t] > 0 else 0.0)
                for t, label in enumerate(encoded["labels"]) if label != -100 and t > 0}
    # no token so close to tau that the rounding of the two computations could decide it
    assert min(abs(confidence[t] - 0.002) for t in expected) > 1e-6
    shown = {}
    for _, title, _ in page_cells(page.read_text()):
        found = re.match(r"token #(\d+) \|[^|]*\| weight ([0-9.]+) \|", html_lib.unescape(title))
        if found:
            shown[int(found.group(1))] = float(found.group(2))
    assert shown == expected
    assert set(expected.values()) == {0.0, 0.5, 1.0, 1.5}  # both masks, alone and together


def test_cuset_kinds_are_the_cuda_mask():
    assert CUSET_KINDS == ("kernel_body", "launch_config")
    assert Span("launch_config", 0, 1).kind in CUSET_KINDS


def test_inspect_cudabench_task_record(tmp_path, tokenizer_dir, make_record):
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps(make_record(7)) + "\n")
    page = tmp_path / "task.html"
    result = runner.invoke(app, ["inspect", str(data), "--tokenizer", str(tokenizer_dir), "--level", "2", "--html", str(page)])
    assert result.exit_code == 0, result.output
    cells = page_cells(page.read_text())
    text = "".join(t for _, _, t in cells)
    prompt_at, code_at = text.index("Elementwise sum of two vectors."), text.index("__global__ void add")
    assert prompt_at < code_at
    # prompt cells are never supervised; the kernel's cells are in the CUDA mask
    assert all(c[0] == "u" for c in cells if "token #" in c[1] and int(re.search(r"chars (\d+)", c[1]).group(1)) < prompt_at + 30)
    launch = [c for c in cells if "launch_config" in html_lib.unescape(c[1])]
    assert launch and all(c[0].startswith("cuda") for c in launch)
    assert "<<<(n + 255) / 256, 256>>>" in "".join(c[2] for c in launch)
