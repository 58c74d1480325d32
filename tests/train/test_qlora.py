"""QLoRA (4-bit NF4 base + LoRA through bitsandbytes) trains on the CPU (bitsandbytes >= 0.50)."""

from __future__ import annotations

import pytest
import torch

from cuset.train.callbacks import read_log

from .conftest import build_program_model
from .helpers import tiny_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model64_dir(tmp_path_factory):
    """bitsandbytes packs 4-bit weights in blocks of 64 inputs on the CPU: hidden size 64."""
    return build_program_model(tmp_path_factory.mktemp("tiny64") / "model", hidden_size=64, intermediate_size=128)


def test_qlora_trains_a_4bit_base_on_the_cpu(model64_dir, train_data, tmp_path):
    import bitsandbytes as bnb

    from cuset.train.model import build_model
    from cuset.train.run import train

    common = ("optim.max_steps=4", "save_steps=0", "report_to=[]", "progress=false", "lora.dropout=0.0",
              "loss.name=sft", "merge=true")
    qcfg = tiny_config(model64_dir, train_data, tmp_path / "q", tmp_path / "c", *common, "finetune=qlora")
    model = build_model(qcfg)
    base = model.get_base_model()
    four_bit = [m for m in base.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert len(four_bit) == 2 * 7  # q, k, v, o, gate, up, down in each of the 2 layers
    assert all(m.weight.dtype == torch.uint8 and m.weight.quant_state.quant_type == "nf4" for m in four_bit)
    assert not isinstance(base.lm_head, bnb.nn.Linear4bit)  # the head stays full precision (the chunked loss reads it)
    del model

    q = train(qcfg)
    lora = train(tiny_config(model64_dir, train_data, tmp_path / "l", tmp_path / "c", *common, "finetune=lora"))
    qlog, llog = read_log(tmp_path / "q" / "train_log.jsonl"), read_log(tmp_path / "l" / "train_log.jsonl")
    assert [r["step"] for r in qlog] == [1, 2, 3, 4]
    # step 1 sees the same adapters (zero B) on a base that differs only by NF4 rounding
    assert qlog[0]["nll"] == pytest.approx(llog[0]["nll"], rel=2e-2) and qlog[0]["nll"] != llog[0]["nll"]
    assert qlog[-1]["nll"] < qlog[0]["nll"]  # it learns
    # the merged model is plain full-precision weights that load without bitsandbytes
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(q["outputs"]["merged"])
    assert not any(isinstance(m, bnb.nn.Linear4bit) for m in merged.modules())
    assert all(p.dtype == torch.float32 for p in merged.parameters())
