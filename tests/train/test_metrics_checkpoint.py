"""Step metrics aggregation (hand-computed) and checkpoints that appear whole or not at all."""

from __future__ import annotations

import math

import pytest

from cuset.train.checkpoint import checkpoints, last_checkpoint, publish
from cuset.train.metrics import StepMetrics

from .helpers import tiny_config


def mb(loss, n_tokens, nll, conf, cuda, w_mean, w_min, w_max, n_samples, dropped=0.0):
    return loss, {"loss": loss, "nll": nll, "conf_kept_frac": conf, "dropped_frac": dropped, "cuda_frac": cuda,
                  "w_mean": w_mean,
                  "w_min": w_min, "w_max": w_max, "n_tokens": n_tokens, "n_samples": n_samples}


def test_step_metrics_weight_tokens_and_samples():
    m = StepMetrics()
    m.new_step()
    loss, stats = mb(0.6, 10, 2.0, 0.5, 0.2, 0.8, 0.7, 0.9, 2, dropped=0.3)
    m.add(loss, stats, samples=2, input_tokens=30)
    loss, stats = mb(0.3, 30, 1.0, 0.1, 0.6, 0.4, 0.4, 0.4, 1, dropped=0.5)
    m.add(loss, stats, samples=1, input_tokens=50)
    out = m.summary(world_size=1)
    assert out["objective"] == pytest.approx(0.9)
    assert out["nll"] == pytest.approx((2.0 * 10 + 1.0 * 30) / 40)
    assert out["conf_kept_frac"] == pytest.approx((0.5 * 10 + 0.1 * 30) / 40)
    assert out["cuda_frac"] == pytest.approx((0.2 * 10 + 0.6 * 30) / 40)
    assert out["dropped_frac"] == pytest.approx((0.3 * 10 + 0.5 * 30) / 40)
    assert out["w_mean"] == pytest.approx((0.8 * 2 + 0.4 * 1) / 3)
    assert (out["w_min"], out["w_max"], out["target_tokens"]) == (pytest.approx(0.4), pytest.approx(0.9), 40)
    assert out["tokens_per_s"] > 0
    assert m.summary() == {}  # reset after reporting


def test_step_metrics_average_steps_and_ranks():
    m = StepMetrics()
    for loss in (1.0, 3.0):  # two optimizer steps logged together
        m.new_step()
        m.add(*mb(loss, 5, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1), samples=1, input_tokens=8)
    # each rank's loss carries a x world_size factor for DDP's gradient mean
    assert m.summary(world_size=2)["objective"] == pytest.approx((1.0 + 3.0) / 2 / 2)


def test_all_masked_micro_batch_keeps_metrics_finite():
    m = StepMetrics()
    m.new_step()
    m.add(*mb(0.0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0), samples=1, input_tokens=8)
    out = m.summary()
    assert out["objective"] == 0.0 and math.isnan(out["nll"])  # no targets: no NLL to report, not 0


def test_publish_replaces_atomically(tmp_path):
    staged, final = tmp_path / ".staging" / "checkpoint-2", tmp_path / "checkpoint-2"
    staged.mkdir(parents=True)
    (staged / "trainer_state.json").write_text("new")
    final.mkdir()
    (final / "trainer_state.json").write_text("old")
    publish(staged, final)
    assert (final / "trainer_state.json").read_text() == "new" and not staged.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".checkpoint")] == []
    (tmp_path / "checkpoint-10").mkdir()  # no trainer_state.json: incomplete, never resumed from
    assert checkpoints(tmp_path) == [final] and last_checkpoint(tmp_path) == final


def test_crash_while_saving_leaves_the_previous_checkpoint(warm_model_dir, train_data, tmp_path, monkeypatch):
    from cuset.train.run import train
    from cuset.train.trainer import CusetTrainer

    original = CusetTrainer._save_rng_state

    def crash_at_step_4(self, output_dir):
        if self.state.global_step == 4:
            raise KeyboardInterrupt("simulated crash while writing checkpoint-4")
        return original(self, output_dir)

    cfg = tiny_config(warm_model_dir, train_data, tmp_path / "run", tmp_path / "c", "optim.max_steps=4", "save_steps=2",
                      "report_to=[]")
    monkeypatch.setattr(CusetTrainer, "_save_rng_state", crash_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        train(cfg)
    run = tmp_path / "run"
    assert (run / ".staging" / "checkpoint-4").is_dir()  # half written, out of the way
    assert [p.name for p in checkpoints(run)] == ["checkpoint-2"]
    monkeypatch.setattr(CusetTrainer, "_save_rng_state", original)
    summary = train(cfg, resume=True)
    assert summary["resumed_from"] == str(run / "checkpoint-2") and summary["steps"] == 4
    assert [p.name for p in checkpoints(run)] == ["checkpoint-2", "checkpoint-4"] and not (run / ".staging").exists()
