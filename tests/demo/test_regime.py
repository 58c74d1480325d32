"""`cuset demo --regime --fast`: two bases (no warm-up, 4 warm-up steps), four arms each, and the
map's numbers recomputed from the files each level wrote."""

import json
import os
import shutil
from collections import defaultdict

import pytest
from typer.testing import CliRunner

from cuset.cli.main import app

pytestmark = [pytest.mark.slow, pytest.mark.nvcc,
              pytest.mark.skipif(shutil.which("nvcc") is None, reason="the demo compiles with nvcc")]


@pytest.fixture(scope="module")
def regime_run(tmp_path_factory):
    parent = tmp_path_factory.mktemp("regime")
    cwd = os.getcwd()
    os.chdir(parent)
    try:
        res = CliRunner().invoke(app, ["demo", "--regime", "--fast", "--out", "run", "progress=false"])
    finally:
        os.chdir(cwd)
    assert res.exit_code == 0, res.output + repr(res.exception)
    return parent / "run"


def _function_at_1(path):
    by_task = defaultdict(list)
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["status"] != "skipped":
            by_task[r["task_id"]].append(bool(r["passed"]))
    return {t: sum(v) / len(v) for t, v in by_task.items()}


def test_levels_share_pretraining_and_the_warmup_is_disjoint(regime_run):
    weak, warm = regime_run / "base-k0", regime_run / "base-k4"
    cfg = json.loads((warm / "demo_config.json").read_text())
    assert (cfg["warmup_steps"], cfg["pretrained"]) == (4, str((weak / "models" / "vanilla").resolve()))
    assert ((warm / "models" / "pretrained" / "model.safetensors").read_bytes()
            == (weak / "models" / "vanilla" / "model.safetensors").read_bytes())
    assert ((warm / "models" / "vanilla" / "model.safetensors").read_bytes()
            != (weak / "models" / "vanilla" / "model.safetensors").read_bytes())
    points = json.loads((warm / "data" / "points.json").read_text())
    used = {tuple(p) for p in points["train"] + points["eval"]}
    assert len(points["warmup"]) == 12 and not used & {tuple(p) for p in points["warmup"]}
    assert not (weak / "data" / "warmup.jsonl").exists()


def test_map_rows_come_from_each_levels_files(regime_run):
    doc = json.loads((regime_run / "regime.json").read_text())
    assert [row["warmup_steps"] for row in doc["levels"]] == [0, 4]
    for row in doc["levels"]:
        level = regime_run / row["dir"]
        base = json.loads((level / "base_nll.json").read_text())
        assert row["base_nll"] == base["nll"] and row["mechanism"]["fit"]["n_tokens"] == base["n_tokens"]
        vanilla = level / "results" / "vanilla.jsonl"  # the base's competence: its own untuned samples
        assert row["base"]["function@1"] == pytest.approx(sum(_function_at_1(vanilla).values()) / 2)
        low = json.loads((level / "low_tokens.json").read_text())["conditions"]
        assert row["low_tokens"] == low and set(low) == {"off", "on"}
        assert low["on"]["data"] == "data/train-replaceable.jsonl" and low["on"]["n_replaceable"] > 0
        assert low["off"]["n_tokens"] == base["n_tokens"]  # the same references as the base's NLL
        assert row["finetune"]["deviations"] and row["finetune"]["reason"].startswith("CI size")
        assert set(row["paired"]) == {"cuset", "cuset:noconf:noregion", "cuset:wnorm"}
        sft = _function_at_1(level / "results" / "sft.jsonl")
        for arm, p in row["paired"].items():
            other = _function_at_1(level / "results" / f"{arm.replace(':', '-')}.jsonl")
            want = sum(other[t] - sft[t] for t in sft) / len(sft)
            assert p["delta"] == pytest.approx(want) and p["n_tasks"] == 2 and p["n_seeds"] == [1, 1]
        for arm, runs in row["dropped"].items():
            log = [json.loads(x) for x in (level / "cells" / arm.replace(":", "-") / "train" / "train_log.jsonl")
                   .read_text().splitlines() if "dropped_frac" in x]
            values = [r["dropped_frac"] for r in log]
            assert runs[0]["mean"] == pytest.approx(sum(values) / len(values)) and runs[0]["n_logged"] == 4
            if arm in ("sft", "cuset:noconf:noregion"):  # nothing has coefficient 0
                assert runs[0]["mean"] == 0.0
    # the warm-up lowered the base's NLL on the fine-tuning set
    assert doc["levels"][1]["base_nll"] < doc["levels"][0]["base_nll"]
    assert (regime_run / "regime.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (regime_run / "regime.md").read_text()
    assert "| [4](base-k4/report.md) |" in md and "CuSeT (sample weight at mean 1 per step) - SFT" in md
    assert f"**{doc['gate']['text']}**" in md and "Why: CI size" in md
    assert "## What the base's low tokens are, with and without replaceable tokens" in md


def test_calibration_scores_each_checkpoint_as_a_level_scores_its_base(regime_run):
    """`--calibrate 2,4`: one 4-step warm-up from the same pretrained model, checkpoints at 2 and
    4. Step 0 is the weak level's base and a 4-step warm-up schedules its learning rate as the
    k = 4 level's does, so those two rows must equal the levels' own base NLL."""
    weak, warm = regime_run / "base-k0", regime_run / "base-k4"
    cwd = os.getcwd()
    os.chdir(regime_run.parent)
    try:
        res = CliRunner().invoke(app, ["demo", "--regime", "--fast", "--calibrate", "4,2", "--out", "cal",
                                       "progress=false", f"pretrained={(weak / 'models' / 'vanilla').resolve()}"])
    finally:
        os.chdir(cwd)
    assert res.exit_code == 0, res.output + repr(res.exception)
    cal = regime_run.parent / "cal"
    doc = json.loads((cal / "calibration.json").read_text())
    assert sorted(doc["levels"], key=int) == ["0", "2", "4"] and doc["warmup_steps_total"] == 4
    assert doc["levels"]["0"]["nll"] == pytest.approx(json.loads((weak / "base_nll.json").read_text())["nll"], rel=1e-6)
    assert doc["levels"]["4"]["nll"] == pytest.approx(json.loads((warm / "base_nll.json").read_text())["nll"], rel=1e-5)
    assert doc["levels"]["4"]["nll"] < doc["levels"]["0"]["nll"]
    assert (cal / "warmup" / "checkpoint-2").is_dir() and "| 2 |" in (cal / "calibration.md").read_text()


def _words(output: str) -> str:
    """The CLI's error panel as plain words (rich wraps it in a box at the terminal's width)."""
    return " ".join(output.replace("│", " ").split())


def test_calibrate_needs_integer_steps(tmp_path):
    res = CliRunner().invoke(app, ["demo", "--fast", "--calibrate", "0,4", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "warm-up steps >= 1, e.g. 10,20,40; got '0,4'" in _words(res.output)
    res = CliRunner().invoke(app, ["demo", "--regime", "--fast", "--calibrate", "2,four", "--out", str(tmp_path / "y")])
    assert res.exit_code == 2 and "comma-separated warm-up steps >= 1, e.g. 10,20,40; got '2,four'" in _words(res.output)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def _nll(share_low, sensitive, neutral, pvalue):
    return {"nll": 0.1, "mechanism": {"fit": {"share_low": share_low}, "mean_conf_sensitive": sensitive,
                                      "mean_conf_neutral": neutral, "ks": {"statistic": 0.2, "pvalue": pvalue}}}


def test_regime_of_a_base_from_its_mechanism_statistics():
    from cuset.demo.report import regime_of

    # the committed calibration's k = 0 and k = 40 rows (docs): weak, then the premise
    assert regime_of(_nll(0.144, 0.579, 0.897, 1e-300))[0] == "weak"
    assert regime_of(_nll(0.014, 0.924, 0.971, 1e-40))[0] == "premise"
    assert regime_of(_nll(0.062, 0.765, 0.931, 1e-40))[0] == "between"
    # few low tokens, but sensitive tokens not less confident, or not significantly: not the premise
    assert regime_of(_nll(0.02, 0.95, 0.90, 1e-9))[0] == "between"
    assert regime_of(_nll(0.02, 0.90, 0.95, 0.2))[0] == "between"
    assert regime_of(_nll(0.05, 0.90, 0.95, 0.01))[0] == "premise"   # the bounds are inclusive
    assert regime_of(_nll(0.1, 0.90, 0.95, 0.01))[0] == "between" and regime_of(_nll(0.1001, 0.9, 0.95, 0.01))[0] == "weak"
    regime, why = regime_of({"nll": 1.0})
    assert regime == "unknown" and "not recorded" in why


def test_the_regime_sentence_says_when_the_mask_has_almost_nothing_to_drop():
    from cuset.demo.report import regime_sentence

    vacuous = regime_sentence(_nll(0.0004, 0.99, 0.998, 1e-300), 0.1)
    assert vacuous.startswith("**Regime: the paper's premise holds on this base** (0.0% of target tokens")
    assert vacuous.endswith("With 0.04% of target tokens at p <= tau the confidence mask has almost nothing to drop: "
                            "CuSeT can differ from SFT here only through its CUDA-span weight and its sample weight.")
    assert "almost nothing" not in regime_sentence(_nll(0.014, 0.924, 0.971, 1e-40), 0.1)   # 1.4%: it drops some
    assert "almost nothing" not in regime_sentence({"nll": 1.0}, 0.1)


def _paired(delta, low, high, p, significant, run_variance="estimated"):
    return {"delta": delta, "low": low, "high": high, "p_value": p, "p_holm": p, "significant": significant,
            "n_tasks": 64, "n_seeds": [1, 1], "run_variance": run_variance, "sentence": ""}


def test_the_maps_conclusion_is_what_each_levels_paired_comparison_says():
    from cuset.demo.regime import conclusion_lines

    weak, strong = _nll(0.144, 0.579, 0.897, 1e-300)["mechanism"], _nll(0.02, 0.889, 0.963, 1e-300)["mechanism"]
    doc = {"metric": "function@1", "levels": [
        {"warmup_steps": 0, "base_nll": 1.489, "mechanism": weak, "base": {"compile@1": 0.552, "function@1": 0.0},
         "methods": {"sft": {}, "cuset": {}, "cuset:wnorm": {}},
         "paired": {"cuset": _paired(-0.133, -0.18, -0.086, 1e-5, True),
                    "cuset:wnorm": _paired(0.0, None, None, None, False)}},
        {"warmup_steps": 40, "base_nll": 0.142, "mechanism": strong, "methods": {"sft": {}, "cuset": {}},
         "paired": {"cuset": _paired(0.031, -0.02, 0.08, 0.21, False, "single_run")}}]}
    cuset, wnorm = conclusion_lines(doc)
    assert cuset.startswith("- CuSeT loses to SFT at k = 0 (base function@1 0.0%, compile@1 55.2%, NLL 1.489, "
                            "token statistics of a weak base")
    assert "-13.3 [-18.0, -8.6] (significant)" in cuset
    # a level whose base competence was not recorded says so; the premise is worded as token statistics
    assert ("and shows no significant difference from SFT at k = 40 (base function@1 n/a, compile@1 n/a, NLL 0.142, "
            "token statistics as the paper's premise has them" in cuset)
    assert "+3.1 [-2.0, +8.0]*" in cuset   # k = 0's runs are several per side: only k = 40 is named
    assert cuset.endswith(". At k = 40 one run per side: those intervals cover task sampling only.")
    assert "beats" not in cuset
    assert wnorm.startswith("- CuSeT (sample weight at mean 1 per step) cannot be tested against SFT at k = 0")
    assert conclusion_lines({"metric": "function@1", "levels": []}) == ["- No fine-tuned arm besides SFT was run."]


def test_map_only_rewrites_the_map_from_the_finished_levels(regime_run, tmp_path):
    before = json.loads((regime_run / "regime.json").read_text())
    res = CliRunner().invoke(app, ["demo", "--regime", "--map-only", "--out", str(regime_run)])
    assert res.exit_code == 0, res.output + repr(res.exception)
    after = json.loads((regime_run / "regime.json").read_text())
    assert after["levels"] == before["levels"] and "wall_s" not in after
    assert after["provenance"]["date_utc"] and "load" in after["provenance"]
    res = CliRunner().invoke(app, ["demo", "--regime", "--map-only", "--out", str(tmp_path)])
    assert res.exit_code != 0 and "no finished level" in _words(res.output)
    res = CliRunner().invoke(app, ["demo", "--map-only", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "give --regime and --out DIR" in _words(res.output)


def test_the_maps_conclusion_says_which_levels_rest_on_one_run():
    """A powered level (every side several runs) beside one-run levels: the sentence names the
    one-run levels instead of calling every interval task-sampling only."""
    from cuset.demo.regime import conclusion_lines

    mech = _nll(0.144, 0.579, 0.897, 1e-300)["mechanism"]

    def level(k, run_variance):
        return {"warmup_steps": k, "base_nll": 1.0, "mechanism": mech, "methods": {"sft": {}, "cuset": {}},
                "paired": {"cuset": _paired(-0.15, -0.2, -0.1, 1e-5, True, run_variance)}}

    doc = {"metric": "function@1", "levels": [level(0, "not_estimated"), level(12, "estimated"),
                                              level(40, "not_estimated"), level(60, "borrowed")]}
    (line,) = conclusion_lines(doc)
    assert "-15.0 [-20.0, -10.0]* (significant)" in line          # k = 0: one run per side
    assert "-15.0 [-20.0, -10.0] (significant)" in line           # k = 12: run variance estimated, no mark
    assert "-15.0 [-20.0, -10.0]\u2020 (significant)" in line     # k = 60: borrowed
    assert line.endswith(" At k = 0, 40 one run per side: those intervals cover task sampling only."
                         " At k = 60 one side has a single run: the other side's run-to-run variance stands in for it.")
    assert "One run per arm" not in line
    doc["levels"] = [level(0, "not_estimated"), level(40, "not_estimated")]
    assert conclusion_lines(doc)[0].endswith(" One run per arm: the intervals cover task sampling only.")
    doc["levels"] = [level(12, "estimated")]
    assert conclusion_lines(doc)[0].endswith("(significant)).")


def _contrast(method, part, delta, low, high, p, significant):
    return {"method": method, "reference": "sft", "method_on": f"{method}:repl", "reference_on": "sft:repl",
            "part": part, "delta": delta, "low": low, "high": high, "p_value": p, "significant": significant,
            "n_tasks": 128, "n_seeds": [4, 4], "run_variance": "estimated", "sentence": f"{method} {part}"}


def test_a_2x2_map_compares_each_replaceable_arm_within_its_condition():
    """methods=2x2: CuSeT:repl measured against SFT:repl (not SFT on the programs as written, which
    would mix the condition's effect into the method's), and the interaction in its own column."""
    from cuset.demo.regime import comparisons, conclusion_lines, regime_markdown

    mech = _nll(0.0004, 0.99, 0.998, 1e-300)["mechanism"]
    row = {"warmup_steps": 1600, "dir": "base-k1600", "base_nll": 0.005, "mechanism": mech,
           "base": {"compile@1": 0.914, "function@1": 0.284}, "finetune": {"finetune": "lora", "finetune_lr": 1e-4,
                                                                         "finetune_steps": 500, "deviations": [],
                                                                         "reason": ""},
           "low_tokens": None, "dropped": {},
           "holm_family": {"arms": 4, "metrics": ["compile@1", "function@1"], "comparisons": 8},
           "methods": {m: {"mean": 0.3} for m in ("sft", "sft:repl", "cuset", "cuset:repl", "profit")},
           "paired": {"sft:repl": _paired(-0.354, -0.42, -0.28, 1e-6, True),
                      "cuset": _paired(-0.021, -0.041, 0.0, 0.045, False),
                      "cuset:repl": _paired(-0.25, -0.31, -0.19, 1e-6, True),
                      "profit": _paired(0.0, -0.015, 0.015, 1.0, False)},
           "two_by_two": {"cuset/without": _contrast("cuset", "without", -0.021, -0.041, 0.0, 0.045, True),
                          "cuset/with": _contrast("cuset", "with", 0.104, 0.056, 0.153, 1e-5, True),
                          "cuset/interaction": _contrast("cuset", "interaction", 0.125, 0.073, 0.177, 1e-5, True)}}
    compared = comparisons(row)
    assert compared["cuset:repl"][0] == "sft:repl" and compared["cuset:repl"][1]["delta"] == 0.104
    assert compared["cuset"][0] == "sft" and compared["sft:repl"][0] == "sft" and compared["profit"][0] == "sft"
    doc = {"metric": "function@1", "levels": [row],
           "gate": {"text": "gate", "min_function": 0.25, "min_compile": 0.65, "passed": [1600]}}
    md = regime_markdown(doc)
    header = next(line for line in md.splitlines() if line.startswith("| Warm-up steps k"))
    assert header.endswith("| SFT (replaceable tokens) - SFT | CuSeT - SFT | CuSeT (replaceable tokens) - SFT "
                           "(replaceable tokens) | ProFit - SFT | Interaction: CuSeT - SFT, with - without |")
    line = next(line for line in md.splitlines() if line.startswith("| [1600]"))
    assert line.endswith("| -35.4 [-42.0, -28.0] (significant) | -2.1 [-4.1, +0.0] | +10.4 [+5.6, +15.3] (significant) "
                         "| +0.0 [-1.5, +1.5] | +12.5 [+7.3, +17.7] (significant) |")
    lines = conclusion_lines(doc)
    assert any(x.startswith("- CuSeT (replaceable tokens) beats SFT (replaceable tokens) at k = 1600") and
               "(within the replaceable-token condition; not Holm-adjusted)." in x for x in lines)
    assert lines[-1] == ("- Replaceable tokens change CuSeT - SFT by (with - without): k = 1600: +12.5 [+7.3, +17.7], "
                         "significant (the 2x2's interaction; not Holm-adjusted).")
    assert "- k = 1600: cuset interaction (2x2, not Holm-adjusted)" in md
    assert ("'significant' is Holm-adjusted within each level, over its family: k = 1600: 4 arms x 2 Pass@k "
            "metrics = 8 comparisons; the intervals are not adjusted;" in md)


def test_a_difference_holm_leaves_not_significant_says_its_interval_is_unadjusted():
    """An interval that excludes 0 beside 'no significant difference' reads as a contradiction
    unless the line says the verdict is Holm's, over which family, and at what adjusted p."""
    from cuset.demo.regime import _family_words, conclusion_lines, holm_family

    mech = _nll(0.0004, 0.99, 0.998, 1e-300)["mechanism"]
    paired = {"dft": {**_paired(0.04, 0.005, 0.075, 0.03, False), "p_holm": 0.21},
              "profit": {**_paired(0.01, -0.02, 0.04, 0.5, False), "p_holm": 1.0}}
    report_rows = [{"a": "sft", "b": arm, "metric": m} for arm in paired for m in ("compile@1", "function@1", "function@3")]
    family = holm_family(report_rows[:-1])   # one comparison could not be tested
    assert family == {"arms": 2, "metrics": ["compile@1", "function@1", "function@3"], "comparisons": 5}
    row = {"warmup_steps": 1600, "base_nll": 0.005, "mechanism": mech, "base": {"compile@1": 0.9, "function@1": 0.3},
           "methods": {"sft": {}, "dft": {}, "profit": {}}, "paired": paired, "holm_family": family}
    assert _family_words(row) == "5 testable comparisons of 2 arms x 3 Pass@k metrics"
    dft, profit = conclusion_lines({"metric": "function@1", "levels": [row]})
    assert dft.startswith("- DFT shows no significant difference from SFT at k = 1600")
    assert ("+4.0 [+0.5, +7.5]; its unadjusted interval excludes 0, but Holm's adjustment over the level's "
            "5 testable comparisons of 2 arms x 3 Pass@k metrics leaves it at p = 0.21)." in dft)
    assert "unadjusted" not in profit and "+1.0 [-2.0, +4.0])." in profit
    assert holm_family(report_rows)["comparisons"] == 6
    assert _family_words({**row, "holm_family": holm_family(report_rows)}) == "2 arms x 3 Pass@k metrics = 6 comparisons"


def test_the_competence_gate_names_the_bases_that_pass_it():
    from cuset.demo.regime import competence_gate

    rows = [{"warmup_steps": 0, "base": {"compile@1": 0.70, "function@1": 0.24}},
            {"warmup_steps": 40, "base": {"compile@1": 0.65, "function@1": 0.25}},
            {"warmup_steps": 80, "base": {"compile@1": 0.64, "function@1": 0.50}}]
    gate = competence_gate(rows, min_compile=0.65, min_function=0.25)
    assert gate["passed"] == [40]  # both bounds inclusive; k = 0 short on function, k = 80 on compile
    assert "passed by the base at k = 40" in gate["text"]
    assert "k = 0: compile@1 70.0%, function@1 24.0%" in gate["text"]
    none = competence_gate(rows, min_compile=0.9, min_function=0.25)
    assert none["passed"] == [] and "no base passes it" in none["text"] and "cannot test the paper's claim" in none["text"]


def test_an_interrupted_map_resumes_at_the_cell_it_stopped_in(regime_run):
    """A map is a sequence of resumable steps: a level whose last arm was cut off after its training
    (its generate and evaluate steps unrecorded) reruns only those; nothing else is recomputed."""
    level = regime_run / "base-k4"
    cell = level / "cells" / "cuset-wnorm"
    steps = json.loads((cell / "steps.json").read_text())
    assert list(steps) == ["train", "generate", "evaluate", "reference_fit"]
    (cell / "steps.json").write_text(json.dumps({"train": steps["train"]}))  # as if killed while generating
    (cell / "generations.jsonl").unlink()
    shutil.rmtree(cell / "eval")
    kept = [*regime_run.glob("base-k*/cells/*/train/run_summary.json"), *regime_run.glob("base-k*/low_tokens.json"),
            *regime_run.glob("base-k*/models/vanilla/model.safetensors"), *regime_run.glob("base-k*/attribution/*.jsonl"),
            *[p for p in regime_run.glob("base-k*/cells/*/generations.jsonl") if p.parent != cell]]
    stamps = {p: p.stat().st_mtime_ns for p in kept}
    cwd = os.getcwd()
    os.chdir(regime_run.parent)
    try:
        res = CliRunner().invoke(app, ["demo", "--regime", "--fast", "--out", "run", "progress=false"])
    finally:
        os.chdir(cwd)
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert {p: p.stat().st_mtime_ns for p in kept} == stamps
    assert list(json.loads((cell / "steps.json").read_text())) == ["train", "generate", "evaluate", "reference_fit"]
    assert (cell / "eval" / "results.jsonl").is_file() and (level / "generations" / "cuset-wnorm.jsonl.gz").is_file()
