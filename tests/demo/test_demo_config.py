"""The demo's configuration and base-model corpus, without running the pipeline."""

import pytest

from cuset.config import load_config
from cuset.demo.config import DEMO_FAMILIES, STUDY_INSTRUCT_FAMILIES, DemoConfig, MethodSpec, parse_method_spec


def test_defaults_name_real_disjoint_families():
    cfg = DemoConfig()
    demo, instruct = cfg.family_list(), cfg.instruct_family_list()
    assert demo == DEMO_FAMILIES.split(",") and instruct == STUDY_INSTRUCT_FAMILIES.split(",")
    assert not set(demo) & set(instruct)


def test_all_families_means_no_filter():
    cfg = DemoConfig(families=" relu , saxpy ")
    assert cfg.family_list() == ["relu", "saxpy"]
    # the base model pretrains on every other family, never on these
    assert "relu" not in cfg.pretrain_family_list() and "gemm" in cfg.pretrain_family_list()
    # 'all' leaves no family for the base model's corpus
    with pytest.raises(ValueError, match="families names them all: name fewer families or set n_pretrain=0"):
        DemoConfig(families="all", n_instruct=0)
    with pytest.raises(ValueError, match="n_pretrain and n_instruct are both 0"):
        DemoConfig(families="all", n_instruct=0, n_pretrain=0)


def test_methods_and_seeds_are_checked():
    from cuset.demo.config import STUDY

    assert DemoConfig(methods="sft, cuset ,asft").method_list() == ["sft", "cuset", "asft"]
    with pytest.raises(ValueError, match="methods: unknown loss 'cusett': did you mean 'cuset'"):
        DemoConfig(methods="sft,cusett")
    with pytest.raises(ValueError, match="names an objective twice"):
        DemoConfig(methods="sft,sft")
    with pytest.raises(ValueError, match="seeds must be >= 1"):
        DemoConfig(seeds=0)
    study = load_config(DemoConfig, base=STUDY)
    assert study.n_eval >= 64 and study.seeds >= 2 and {"sft", "cuset"} < set(study.method_list())


def test_unknown_family_is_named_with_a_suggestion():
    with pytest.raises(ValueError, match=r"families: .*relux.*relu"):
        DemoConfig(families="relux,saxpy")
    with pytest.raises(ValueError, match=r"instruct_families: .*gemmm"):
        DemoConfig(instruct_families="gemmm")


def test_instruct_families_must_be_disjoint_from_the_demo_families():
    with pytest.raises(ValueError, match="disjoint from families; both name relu"):
        DemoConfig(instruct_families="relu,transpose")
    # 'all' demo families overlap any instruction family, unless there is no instruction data
    with pytest.raises(ValueError, match="disjoint"):
        DemoConfig(families="all", n_pretrain=0)


@pytest.mark.parametrize("key, value", [("n_instruct", -1), ("seq_len", 0), ("seq_len", 8192), ("n_train", 0)])
def test_out_of_range_numbers_are_rejected(key, value):
    with pytest.raises(ValueError, match=key):
        DemoConfig(**{key: value})


def test_overrides_reach_the_config():
    cfg = load_config(DemoConfig, overrides=["families=relu,where", "n_instruct=0", "seq_len=512"])
    assert cfg.family_list() == ["relu", "where"] and cfg.n_instruct == 0 and cfg.seq_len == 512


def test_instruction_document_is_the_fine_tuning_rendering(tmp_path):
    """A base-model instruction pair renders exactly like the fine-tuning data: the
    ChatML prompt, then the fenced program as the assistant turn."""
    from transformers import AutoTokenizer

    from cuset.curation.synth import synthesize
    from cuset.demo.pretrain import instruction_document
    from cuset.tasks import render_prompt
    from cuset.train.tiny import build_tiny_model

    (task,) = synthesize(1, 0, families=["transpose"])
    build_tiny_model(tmp_path, [task.bench_cu], vocab_size=300)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    doc = instruction_document(tok, task)
    user = render_prompt(task, 1).messages()[-1]["content"]
    assert doc.startswith("<|im_start|>system\n")
    assert f"<|im_start|>user\n{user}<|im_end|>\n" in doc
    assert doc.endswith(f"<|im_start|>assistant\n```cuda\n{task.bench_cu.strip()}\n```<|im_end|>\n")


def test_cli_lists_the_keys_and_rejects_bad_overrides(tmp_path):
    from typer.testing import CliRunner

    from cuset.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["demo", "--help-config"], terminal_width=200)
    assert res.exit_code == 0
    for key in ("n_instruct", "instruct_families", "finetune_steps", "max_new_tokens"):
        assert key in res.output
    res = runner.invoke(app, ["demo", "--out", str(tmp_path / "run"), "families=relux"])
    assert res.exit_code != 0 and "relu" in res.output
    assert not (tmp_path / "run").exists()  # nothing started


def test_method_specs_set_the_span_mode_per_run(tmp_path):
    from cuset.demo.run import DemoRun

    cfg = DemoConfig(methods="sft,cuset,cuset:paper", seeds=2)
    assert cfg.method_spec("cuset:paper") == MethodSpec("cuset", "paper")
    assert cfg.method_spec("cuset") == MethodSpec("cuset", "broad")
    assert DemoConfig(cuda_spans="paper").method_spec("sft") == MethodSpec("sft", "paper")
    run = DemoRun(cfg, tmp_path)
    assert run.models == ["vanilla", "sft", "cuset", "cuset-paper", "sft-seed1", "cuset-seed1", "cuset-paper-seed1"]
    assert run.method_of("cuset-paper-seed1") == "cuset:paper" and run.seed_of("cuset-paper-seed1") == 1
    spans = {m: (run.cell(m).train.loss.name, run.cell(m).train.data.cuda_spans) for m in ("sft", "cuset", "cuset-paper")}
    assert spans == {"sft": ("sft", "broad"), "cuset": ("cuset", "broad"), "cuset-paper": ("cuset", "paper")}
    with pytest.raises(ValueError, match=r"'cuset:narrow': 'narrow' is not a part.*\(broad or paper, e.g. cuset:paper\)"):
        DemoConfig(methods="sft,cuset:narrow")


def test_method_specs_switch_off_parts_of_cuset(tmp_path):
    """The paper's Table 5 as demo arms: each ablation part turns one LossConfig switch off."""
    from cuset.demo.run import DemoRun

    assert parse_method_spec("cuset:paper:noconf") == MethodSpec("cuset", "paper", ("noconf",))
    assert parse_method_spec("cuset:noregion:nocuda") == MethodSpec("cuset", "", ("noregion", "nocuda"))
    run = DemoRun(DemoConfig(methods="sft,cuset:noconf,cuset:nocuda:noregion"), tmp_path)
    assert run.models == ["vanilla", "sft", "cuset-noconf", "cuset-nocuda-noregion"]
    switches = {m: (lambda l: (l.name, l.conf_mask, l.cuda_mask, l.region_weight))(run.cell(m).train.loss)
                for m in run.models[1:]}
    assert switches == {"sft": ("sft", True, True, True), "cuset-noconf": ("cuset", False, True, True),
                        "cuset-nocuda-noregion": ("cuset", True, False, False)}
    with pytest.raises(ValueError, match=r"'sft:noconf': noconf is a switch of CuSeT's objective; sft has none"):
        DemoConfig(methods="sft:noconf")
    with pytest.raises(ValueError, match=r"'cuset:noconf:noconf' names a part twice"):
        DemoConfig(methods="cuset:noconf:noconf")
    with pytest.raises(ValueError, match=r"'cuset:paper:broad' names a part twice"):
        DemoConfig(methods="cuset:paper:broad")
    with pytest.raises(ValueError, match=r"unknown loss 'cusett': did you mean 'cuset'"):
        DemoConfig(methods="cusett:noconf")


def test_cuset_runs_at_the_papers_settings(tmp_path):
    """Section 5.1: l = 256, tau = 0.1, lambda = 1.0, in every preset (the study's responses average
    about 690 tokens, so the paper's window applies)."""
    from cuset.demo.config import FAST, STUDY
    from cuset.demo.run import DemoRun

    for preset in ({}, FAST, STUDY):
        loss = DemoRun(DemoConfig(**preset), tmp_path).cell("cuset").train.loss
        assert (loss.window, loss.tau, loss.lam) == (256, 0.1, 1.0)


def test_wnorm_sets_weight_norm_and_combines_with_other_switches(tmp_path):
    from cuset.demo.run import DemoRun

    assert parse_method_spec("cuset:wnorm:noconf") == MethodSpec("cuset", "", ("wnorm", "noconf"))
    run = DemoRun(DemoConfig(methods="sft,cuset:wnorm,cuset:noconf:wnorm"), tmp_path)
    loss = {m: run.cell(m).train.loss for m in run.models[1:]}
    assert [(m, l.weight_norm, l.conf_mask, l.region_weight) for m, l in loss.items()] == [
        ("sft", False, True, True), ("cuset-wnorm", True, True, True), ("cuset-noconf-wnorm", True, False, True)]
    with pytest.raises(ValueError, match=r"'cuset:noregion:wnorm': wnorm renormalises the sample weight that "
                                         r"noregion turns off"):
        DemoConfig(methods="cuset:noregion:wnorm")
    with pytest.raises(ValueError, match=r"'dft:wnorm': wnorm is a switch of CuSeT's objective"):
        DemoConfig(methods="dft:wnorm")


def test_micro_batches_accumulate_to_the_step_batch(tmp_path):
    from cuset.demo.run import DemoRun

    optim = DemoRun(DemoConfig(batch_size=4, micro_batch=1), tmp_path).cell("sft").train.optim
    assert (optim.per_device_batch_size, optim.gradient_accumulation_steps) == (1, 4)
    optim = DemoRun(DemoConfig(batch_size=4, micro_batch=0), tmp_path).cell("sft").train.optim
    assert (optim.per_device_batch_size, optim.gradient_accumulation_steps) == (4, 1)
    optim = DemoRun(DemoConfig(batch_size=2, micro_batch=0), tmp_path).cell("sft").train.optim   # 0 follows batch_size
    assert (optim.per_device_batch_size, optim.gradient_accumulation_steps) == (2, 1)
    with pytest.raises(ValueError, match=r"micro_batch \(3\) must divide batch_size \(4\)"):
        DemoConfig(micro_batch=3)
    with pytest.raises(ValueError, match=r"micro_batch \(-1\) must divide"):
        DemoConfig(micro_batch=-1)


def test_report_labels_name_the_span_mode():
    from cuset.demo.report import row_label

    assert row_label("cuset:paper") == "CuSeT (paper spans)"
    assert row_label("cuset:paper:noconf") == "CuSeT (paper spans, no confidence mask)"
    assert row_label("cuset:wnorm") == "CuSeT (sample weight at mean 1 per step)"
    assert row_label("cuset:nocuda:noregion") == "CuSeT (no CUDA mask, no sample weight)"
    assert row_label("cuset") == "CuSeT" and row_label("vanilla").startswith("Vanilla")


def test_the_2x2_arm_set_and_replaceable_arms(tmp_path):
    """methods=2x2: {SFT, CuSeT (paper spans)} x replaceable tokens {off, on}, ProFit, DFT, CuSeT (broad
    spans); a :repl arm trains on the replaceable variant of the fine-tuning set."""
    from cuset.curation.variation import vary_task
    from cuset.demo.run import DemoRun
    from cuset.tasks import load_tasks

    cfg = DemoConfig(methods="2x2")
    assert cfg.method_list() == ["sft", "sft:repl", "cuset:paper", "cuset:paper:repl", "profit", "dft", "cuset:broad"]
    assert parse_method_spec("sft:repl") == MethodSpec("sft", "", (), True)
    assert parse_method_spec("cuset:paper:repl").qualifiers() == ["paper spans", "replaceable tokens"]
    with pytest.raises(ValueError, match="names a part twice"):
        parse_method_spec("sft:repl:repl")
    with pytest.raises(ValueError, match="replaceable=true varies every arm's training programs"):
        DemoConfig(methods="sft,sft:repl", replaceable=True)
    with pytest.raises(ValueError, match="names one arm twice"):  # broad is the default span mode
        DemoConfig(methods="sft,cuset,cuset:broad")
    run = DemoRun(DemoConfig(methods="sft,sft:repl", n_train=3), tmp_path)
    run.make_data()
    assert run.cell("sft").train.data.paths == [str(run.train_tasks)]
    assert run.cell("sft-repl").train.data.paths == [str(run.replaceable_train_tasks)]
    plain, varied = load_tasks(run.train_tasks)[0], load_tasks(run.replaceable_train_tasks)[0]
    assert [t.bench_cu for t in varied] == [vary_task(t, 0).bench_cu for t in plain]
    assert [t.level1_prompt for t in varied] == [t.level1_prompt for t in plain]


def test_the_maps_fine_tuning_is_the_papers_unless_a_reason_is_given(tmp_path):
    from cuset.demo.config import REGIME
    from cuset.demo.regime import run_regime
    from cuset.errors import CusetError

    paper = DemoConfig(**REGIME)
    assert (paper.finetune, paper.finetune_lr, paper.paper_finetune_deviations()) == ("lora", 1e-4, [])
    full = DemoConfig(**{**REGIME, "finetune": "full", "finetune_lr": 3e-3, "out": str(tmp_path / "map")})
    assert full.paper_finetune_deviations() == ["full fine-tuning instead of LoRA r=8, alpha 16",
                                                "learning rate 0.003 instead of 0.0001"]
    with pytest.raises(CusetError, match='say why with finetune_reason="..."'):
        run_regime(full)
    assert not (tmp_path / "map").exists()  # refused before anything ran
    with pytest.raises(ValueError, match="gate_function is a fraction"):
        DemoConfig(gate_function=25)
