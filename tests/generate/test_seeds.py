"""cuset.generate.seeds.sample_seed: one stable seed per (base seed, task id, sample)."""

import hashlib
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuset.generate.seeds import SEED_LIMIT, sample_seed
from cuset.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[2]
# Values of the formula as first released: a change here changes every seeded run's samples.
PINNED = {(0, 2, 1): 1847762632, (0, 0, 0): 182970222, (0, "kb_relu", 0): 1226196532,
          (0, "kb_relu", 1): 1425956057, (1, "kb_relu", 0): 1131544780, (0, 5, 0): 1382498790,
          (0, "5", 0): 1838621173, (-3, "ünï", 7): 904234235}


def test_the_documented_formula_by_hand():
    # blake2b-64 of the canonical JSON text, reduced mod 2**31 (a power of two: no bias)
    text = '["cuset.generate.sample_seed/1",0,"kb_relu",0]'
    expected = int(hashlib.blake2b(text.encode(), digest_size=8).hexdigest(), 16) % 2**31
    assert sample_seed(0, "kb_relu", 0) == expected == PINNED[(0, "kb_relu", 0)]
    assert json.dumps(["x", "ünï"], ensure_ascii=True) == '["x", "\\u00fcn\\u00ef"]'  # non-ASCII names: escaped


def test_pinned_values_and_the_same_in_other_processes():
    for key, seed in PINNED.items():
        assert sample_seed(*key) == seed
    # Python salts hash() per process; the seeds must not depend on it.
    code = ("import json, sys; from cuset.generate.seeds import sample_seed; "
            "print(json.dumps([sample_seed(*k) for k in json.loads(sys.argv[1])]))")
    keys = [list(k) for k in PINNED]
    for salt in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code, json.dumps(keys)], cwd=ROOT, capture_output=True,
                             text=True, check=True, env={**os.environ, "PYTHONHASHSEED": salt}).stdout
        assert json.loads(out) == list(PINNED.values())


def test_in_range_and_distinct_over_both_benchmarks():
    kb_ids = [t.id for t in load_tasks(ROOT / "suites" / "kernelbench")[0]]
    assert len(kb_ids) == 23 and all(isinstance(i, str) for i in kb_ids)
    ids = kb_ids + list(range(500)) + [str(i) for i in range(500)]   # the int 5 and the name "5" differ
    keys = list(itertools.product((0, 1, 2**40), ids, range(3)))
    seeds = [sample_seed(*k) for k in keys]
    assert all(0 <= s < SEED_LIMIT for s in seeds)
    assert len(set(seeds)) == len(keys) == 3 * 1023 * 3
    # the old formula (base + 1000 * task + sample) gave task 1 sample 1000 the seed of task 2 sample 0
    assert sample_seed(0, 1, 1000) != sample_seed(0, 2, 0)


@pytest.mark.parametrize("args, message", [
    ((0, "", 0), "task id must be an integer .* got ''"),
    ((0, True, 0), "task id must be .* got True"),
    ((0, 1.0, 0), "task id must be .* got 1.0"),
    ((0, "kb_relu", -1), "sample must be an integer >= 0, got -1"),
    ((0, "kb_relu", "0"), "sample must be an integer >= 0, got '0'"),
    ((None, "kb_relu", 0), "sampling seed must be an integer, got None"),
    ((False, 3, 0), "sampling seed must be an integer, got False"),
])
def test_bad_arguments_are_clear_errors(args, message):
    with pytest.raises(ValueError, match=message):
        sample_seed(*args)
