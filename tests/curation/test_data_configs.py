from pathlib import Path

import pytest

from cuset.config import load_config
from cuset.curation.config import DataBuildConfig

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs" / "data").glob("*.yaml"))


def test_there_are_shipped_configs():
    assert {p.name for p in CONFIGS} >= {"paper.yaml", "synth_tasks.yaml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    cfg = load_config(DataBuildConfig, path)
    assert cfg.sources and cfg.out_dir.startswith("runs/data/")
    for ev in cfg.decontam.eval_sets:  # repository files they name exist
        if ev.endswith(".jsonl"):
            assert (ROOT / ev).exists(), ev


def test_paper_config_matches_the_paper():
    cfg = load_config(DataBuildConfig, ROOT / "configs" / "data" / "paper.yaml")
    assert cfg.validation.cases == [0, 1, 2, 3, 4] and cfg.validation.execution.backend == "gpu"
    assert cfg.llm.model.startswith("Qwen/Qwen3-Coder")
