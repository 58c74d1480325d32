"""published.json: the paper's numbers, checked cell by cell and for internal consistency."""

import re
from pathlib import Path

import pytest

from cuset.analysis.published import published, published_figure4, published_rows, published_section3

# The lines of the paper's text that hold these numbers, copied into the repository
PAPER = Path(__file__).resolve().parents[1] / "fixtures" / "paper" / "cuset-paper-tables.txt"


def row(table, **match):
    hits = [r for r in published_rows(table) if all(r.get(k) == v for k, v in match.items())]
    assert len(hits) == 1, (table, match, hits)
    return hits[0]


def cells(r):
    return (r["pass@1"]["compilation"], r["pass@1"]["function"], r["pass@3"]["compilation"], r["pass@3"]["function"])


def test_table2_spot_checks():
    assert len(published_rows("table2")) == 21
    assert cells(row("table2", model="Qwen2.5-Coder-7B-Instruct", method="CuSeT")) == (93.6, 65.6, 98.8, 74.8)
    assert cells(row("table2", model="Seed-Coder-8B-Instruct", method="Vanilla")) == (4.0, 2.8, 9.0, 6.6)
    assert cells(row("table2", model="DeepSeek-Coder-6.7B-Instruct", method="ASFT")) == (89.4, 51.8, 93.2, 56.0)
    assert row("table2", model="Seed-Coder-8B-Instruct", method="ProFit")["provenance"] == \
        "Table 2, row Seed-Coder-8B-Instruct / ProFit"


def test_table3_spot_checks():
    r = row("table3", model="GLM-5.1")
    assert (r["type"], r["params"], r["avg_tokens"]) == ("Reasoning", "40B/744B", 8220)
    assert cells(r) == (16.8, 15.6, 32.2, 29.2)
    assert row("table3", model="Qwen3-14B")["avg_tokens"] == 722


def test_tables_agree_where_the_paper_repeats_itself():
    t2_cuset = {r["model"]: cells(r) for r in published_rows("table2") if r["method"] == "CuSeT"}
    for r in published_rows("table3"):
        if r["method"] == "CuSeT" and r["model"] in t2_cuset:
            assert cells(r) == t2_cuset[r["model"]]
    assert cells(row("table4", model="Qwen2.5-Coder-32B-Instruct", method="CuSeT")) == \
        cells(row("table3", model="Qwen2.5-Coder-32B-Instruct"))
    t5 = published_rows("table5")
    qwen = {r["method"]: cells(r) for r in published_rows("table2") if r["model"] == "Qwen2.5-Coder-7B-Instruct"}
    assert cells(t5[0]) == qwen["SFT"] and cells(t5[1]) == qwen["ProFit"] and cells(t5[4]) == qwen["CuSeT"]
    assert [r["switches_inferred"] for r in t5] == [False, False, True, True, False]
    assert (t5[0]["conf_mask"], t5[0]["cuda_mask"], t5[0]["region_weight"]) == (False, False, False)
    assert (t5[4]["conf_mask"], t5[4]["cuda_mask"], t5[4]["region_weight"]) == (True, True, True)


def test_section3_and_figure4_values():
    s3 = published_section3()
    assert (s3["share_samples_with_low_window"], s3["share_low_windows_overlapping_sensitive"]) == (74.47, 91.18)
    assert s3["ks_pvalue"] == 4.6e-39 and s3["window"] == 64
    f4 = published_figure4()
    assert f4["defaults"]["tau"] == 0.1 and f4["defaults"]["window"] == 256
    points = {(p["param"], p["value"]): p for p in f4["points"]}
    assert points[("lam", 4.0)]["pass@1"]["function"] == 58.8
    assert points[("window", 512)]["pass@1"]["function"] == 61.8


def test_every_row_has_provenance_and_unknown_table_errors():
    for table in ("table2", "table3", "table4", "table5"):
        assert all(r["provenance"].startswith(f"Table {table[-1]}") for r in published_rows(table))
    with pytest.raises(KeyError, match="known: table2"):
        published_rows("table9")
    assert "Never results of this toolkit" in published()["_about"]


def test_every_table2_3_5_row_appears_in_the_paper_text():
    text = PAPER.read_text(encoding="utf-8")
    lines = set(text.splitlines())
    fmt = lambda r: " ".join(f"{v:.1f}" for v in cells(r))
    for r in published_rows("table2"):
        assert any(line.endswith(f"{r['method']} {fmt(r)}") for line in lines), r
    for r in published_rows("table3"):
        assert f"{r['model']} {r['type']} {r['params']} {fmt(r)} {r['avg_tokens']:,}" in lines, r
    for r in published_rows("table5"):
        assert fmt(r) in lines, r
    assert re.search(r"74\.47%.*91\.18%", text)
