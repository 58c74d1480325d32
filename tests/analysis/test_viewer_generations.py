"""A committed demo report keeps its generations and evaluation tasks compressed beside its
compact results; the viewer built from that folder alone shows each sample's program, prompt and
attribution (the committed example site showed "Program evaluated: not available" before)."""

import gzip
import json
from types import SimpleNamespace

from markupsafe import escape

from cuset.analysis.attribution import Attribution
from cuset.analysis.viewer.site import build_site
from cuset.demo.report import write_compact_results, write_generations
from cuset.execute.result import Status
from cuset.generate.records import GenerationRecord, save_generations
from cuset.tasks import save_tasks

from viewer_runs import sample_result

PROGRAM = 'int main() { int a = 1 < 2 && 3 > 2; printf("<b>%d</b>", a); return 0; }'


def test_generations_round_trip_from_the_demo_writer_to_the_sample_page(tmp_path):
    from cuset.curation.synth import synthesize

    task = synthesize(1, 0, families=["saxpy"])[0]
    work = tmp_path / "run"
    save_tasks([task], work / "data" / "eval.jsonl")
    save_generations(work / "gens.jsonl", [GenerationRecord(task.id, task.task_name, 0, "m", 1,
                                                            f"```cuda\n{PROGRAM}\n```", PROGRAM, 40, "stop", 0.5)])
    from cuset.evaluate.records import save_results

    save_results(work / "results.jsonl", [sample_result(task.id, 0, Status.WRONG, name=task.task_name)])
    run = SimpleNamespace(models=["sft"], eval_tasks=work / "data" / "eval.jsonl",
                          generations=lambda m: work / "gens.jsonl")
    committed = tmp_path / "committed"
    paths = write_generations(run, committed)
    assert paths == {"sft": "generations/sft.jsonl.gz"}
    with gzip.open(committed / paths["sft"], "rt") as fh:    # compressed, and the same bytes twice
        assert json.loads(fh.readline())["code"] == PROGRAM
    first = (committed / paths["sft"]).read_bytes()
    write_generations(run, committed)
    assert (committed / paths["sft"]).read_bytes() == first
    write_compact_results(work / "results.jsonl", committed / "results" / "sft.jsonl")
    (committed / "attribution").mkdir()
    (committed / "attribution" / "sft.jsonl").write_text(json.dumps(Attribution(
        task.id, 0, "wrong", "low_outside", position=12, n_tokens=40, followed="reference", reference_token="<",
        sample_token="&", p_base=0.0125, in_mask=False).to_json()) + "\n")
    (committed / "report.json").write_text(json.dumps({"runs": {"sft": {
        "method": "sft", "seed": 0, "results": "results/sft.jsonl", "generations": paths["sft"]}}}))

    site = build_site([committed], tmp_path / "view")
    page = next((site.out / "s" / "0").glob("*.html")).read_text()
    assert "Not available: the run" not in page
    assert 'id="program"' in page
    assert str(escape(PROGRAM)) in page         # the response, escaped as the templates escape, holds the program
    assert "<b>%d</b>" not in page
    assert str(escape(task.level1_prompt.splitlines()[0])) in page
    assert 'id="attribution"' in page and "p &lt;= tau, outside the CUDA mask" in page
    assert "response token 12 of 40: <code>&amp;</code> where the correct program has <code>&lt;</code>" in page
    assert "p = 0.0125 before fine-tuning; outside the CUDA mask" in page
