"""What a build over the test sources (tests/curation/conftest.py: build_config) must report.

Inputs: 16 files in the CUDA directory (12 committed .cu/.cuh, 4 made by the
fixture), 4 lines of pairs.jsonl, 2 records of tasks.jsonl.
"""

EXPECTED_STAGES = {
    "sources": {"seen": 22, "candidates": 12, "by_kind": {"code": 10, "pair": 1, "task": 1},
                "skipped": {"bad_json": 1, "binary": 1, "identical_copy": 1, "missing_field": 1, "no_code": 1,
                            "no_kernel": 1, "non_utf8": 1, "oversized": 1, "task_missing_field": 1, "unreadable": 1}},
    "synthesis": {"in": 12, "given": 1, "synthesized": 9, "rejected": {"bad_json": 1, "missing_field": 1},
                  "deferred": {}, "out": 10},
    # broken_syntax.cu does not compile, broken_crash.cu exits 1, broken_wrong.cu computes 2x instead of x^2
    "validation": {"in": 10, "rejected": {"compile_error": 1, "runtime_error": 1, "wrong": 1}, "out": 7},
    # vector_add_copy.cu differs only in layout/comments, vector_add_checked.cu adds one line
    "dedup": {"in": 7, "removed": {"exact_duplicate": 1, "near_duplicate": 1}, "out": 5},
    # leaky_relu_copy.cu is the benchmark's Leaky_ReLU reference with other comments
    "decontamination": {"in": 5, "eval_tasks": 2, "removed": {"prompt_and_code_overlap": 1}, "out": 4},
    "output": {"tasks": 4, "path": "train.jsonl"},
}
LLM_REQUESTS = 11  # 10 programs + 1 pair; the CUDABench task needs none
TRAIN_NAMES = ["Row_Sum", "Vector_Add", "Cube", "Vector_Negate"]
VALIDATION_STATUS = {"broken_syntax.cu": "compile_error", "broken_crash.cu": "runtime_error", "broken_wrong.cu": "wrong"}


def check_manifest(manifest: dict) -> None:
    stages = manifest["stages"]
    for name, expected in EXPECTED_STAGES.items():
        got = {k: v for k, v in stages[name].items() if k in expected}
        assert got == expected, f"stage {name}: {got} != {expected}"
    # the funnel adds up
    assert stages["sources"]["seen"] == stages["sources"]["candidates"] + sum(stages["sources"]["skipped"].values())
    for name in ("synthesis", "validation", "dedup", "decontamination"):
        s = stages[name]
        removed = sum(s.get("rejected", {}).values()) + sum(s.get("removed", {}).values()) + sum(s.get("deferred", {}).values())
        assert s["in"] == s["out"] + removed, name
    assert manifest["complete"] is True
