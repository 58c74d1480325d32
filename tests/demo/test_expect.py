"""Each demo step announces what it does and how long it should take (issue 63)."""

import dataclasses
import logging

import pytest

from cuset.demo import expect
from cuset.demo.config import DemoConfig


@pytest.fixture
def rates(monkeypatch):
    for key, value in {"train_example": 0.5, "generate_token": 0.001, "evaluate_sample": 2.0,
                       "score_reference": 0.25, "synth_task": 0.01}.items():
        monkeypatch.setitem(expect.SECONDS_PER, key, value)


def test_expected_seconds_by_hand(rates):
    cfg = DemoConfig(finetune_steps=100, batch_size=4, n_eval=10, samples=3, max_new_tokens=500, n_train=200,
                     n_pretrain=50, n_instruct=40)
    assert expect.expected(cfg, "train", "sft") == pytest.approx(0.5 * 100 * 4)            # 200 s
    # CuSeT's steps are slower under full fine-tuning, the same as SFT's under LoRA (the default)
    assert expect.expected(dataclasses.replace(cfg, finetune="full"), "train", "cuset:paper") == pytest.approx(200 * 1.6)
    assert expect.expected(cfg, "train", "cuset:paper") == pytest.approx(200)
    assert expect.expected(cfg, "train", "dft") == pytest.approx(200 * expect.OTHER_LOSS_FACTOR)
    assert expect.expected(cfg, "generate") == pytest.approx(0.001 * 10 * 3 * 500)         # 15 s
    assert expect.expected(cfg, "evaluate") == pytest.approx(2.0 * 30)
    assert expect.expected(cfg, "data") == pytest.approx(0.01 * (200 + 10 + 50 + 40))
    assert expect.expected(cfg, "reference_fit") == pytest.approx(0.25 * 10)             # n_eval references
    # a model half as wide costs a quarter per token
    assert expect.expected(DemoConfig(hidden=64, finetune_steps=100), "train") == pytest.approx(0.5 * 400 / 4)
    with pytest.raises(ValueError, match="no expected time for step 'base_model'"):
        expect.expected(cfg, "base_model")


def test_announcements_say_what_and_how_long(rates):
    cfg = DemoConfig(finetune_steps=100, batch_size=4)
    assert expect.announce(cfg, "train", "sft") == ("fine-tune with sft: 100 steps of 4 examples, expected about "
                                                    "3 minutes on 2 idle cores")
    assert expect.minutes(59) == "under a minute" and expect.minutes(60) == "about 1 minute"
    assert expect.minutes(200) == "about 3 minutes"


def test_a_step_is_announced_before_it_runs(tmp_path, caplog):
    from cuset.experiment import StepLog

    ran = []
    with caplog.at_level(logging.INFO, logger="cuset.experiment.cell"):
        StepLog(tmp_path, "demo").run("train", lambda: ran.append(1), "fine-tune, expected about 3 minutes")
    assert ran == [1]
    assert caplog.messages[0] == "[demo] train: fine-tune, expected about 3 minutes ..."
