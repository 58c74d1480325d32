"""CUDABench's roofline arithmetic on recorded ncu CSV (tests/fixtures/perf), every expected
value computed by hand from the fixture's numbers (written out below)."""

from pathlib import Path

import pytest

from cuset.execute.perf.ncu import (
    NcuCsvError, check_believable, kernel_rooflines, parse_ncu_csv, program_roofline, unit_scale,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "perf"
# Every kernel of the fixtures: 64 byte/cycle x 1e9 DRAM cycle/s = 64e9 B/s peak traffic;
# 2 x 4096 FFMA/cycle x 1.5e9 SM cycle/s = 12.288e12 FLOP/s peak.
PEAK_DRAM, PEAK_FLOP = 64e9, 12.288e12


def read(name):
    return parse_ncu_csv((FIXTURES / name).read_text(), name)


def test_units_are_brought_to_base_units():
    assert unit_scale("Gbyte/second") == 1e9
    assert unit_scale("cycle/nsecond") == 1e9
    assert unit_scale("Mbyte/usecond") == 1e12
    assert unit_scale("byte/cycle") == 1.0 and unit_scale("%") == 1.0 and unit_scale("") == 1.0


def test_two_kernels_one_launched_twice():
    rows = read("ncu_two_kernels.csv")
    assert len(rows) == 3 * 14
    saxpy, copy = sorted(kernel_rooflines(rows), key=lambda k: k.kernel, reverse=True)
    # saxpy, launches 0 and 2 (the second in ncu's scaled units, 34 Gbyte/s and 1.5 cycle/ns):
    # DRAM (30e9 + 34e9) / 2 = 32e9 B/s; FFMA/cycle (100 + 140) / 2 = 120 -> 240 FLOP/cycle x 1.5e9 = 3.6e11 FLOP/s
    assert saxpy.launches == 2
    assert saxpy.peak_dram_rate == pytest.approx(PEAK_DRAM) and saxpy.peak_flop_rate == pytest.approx(PEAK_FLOP)
    assert saxpy.dram_rate == pytest.approx(32e9) and saxpy.flop_rate == pytest.approx(3.6e11)
    assert saxpy.bandwidth_utilisation == pytest.approx(0.5)                 # 32e9 / 64e9
    assert saxpy.compute_efficiency == pytest.approx(0.029296875)            # 3.6e11 / 12.288e12
    assert saxpy.arithmetic_intensity == pytest.approx(11.25)                # 3.6e11 / 32e9
    assert saxpy.score == pytest.approx(0.5)   # 3.6e11 / min(12.288e12, 11.25 x 64e9 = 7.2e11)
    # copy_kernel: no FLOPs, 48e9 B/s -> BU 0.75, CE 0, score = BU
    assert copy.launches == 1 and copy.flop_rate == 0
    assert (copy.bandwidth_utilisation, copy.compute_efficiency, copy.score) == pytest.approx((0.75, 0.0, 0.75))
    program = program_roofline(rows)   # the kernel with FLOPs scores the program, as the official harness picks
    assert program.kernel.startswith("saxpy")
    assert (program.bandwidth_utilisation, program.compute_efficiency, program.score) == pytest.approx(
        (0.5, 0.029296875, 0.5))
    assert len(program.to_json()["kernels"]) == 2


def test_no_flops_program_scores_its_bandwidth_utilisation():
    program = program_roofline(read("ncu_copy_only.csv"))
    assert (program.bandwidth_utilisation, program.compute_efficiency, program.score) == pytest.approx(
        (0.75, 0.0, 0.75))
    assert program.to_json()["kernels"][0]["arithmetic_intensity"] == 0.0


def test_compute_bound_kernel_is_capped_by_peak_flops():
    # 6.4e9 B/s -> BU 0.1; FFMA 2048/cycle -> 4096 FLOP/cycle x 1.5e9 = 6.144e12 FLOP/s -> CE 0.5;
    # intensity 960 FLOP/B x 64e9 = 6.144e13 > peak 12.288e12: score = 6.144e12 / 12.288e12 = 0.5
    (gemm,) = kernel_rooflines(read("ncu_gemm.csv"))
    assert gemm.arithmetic_intensity == pytest.approx(960.0)
    assert (gemm.bandwidth_utilisation, gemm.compute_efficiency, gemm.score) == pytest.approx((0.1, 0.5, 0.5))


def test_bad_csv_names_the_line_and_the_fix():
    text = (FIXTURES / "ncu_copy_only.csv").read_text()
    with pytest.raises(NcuCsvError, match=r"x.csv: no ncu CSV header"):
        parse_ncu_csv("==PROF== no kernels were profiled\n", "x.csv")
    bad = text.replace('"48,000,000,000"', '"lots"')
    with pytest.raises(NcuCsvError, match=r"x.csv:7: metric 'dram__bytes.sum.per_second' .* 'lots', not a number"):
        parse_ncu_csv(bad, "x.csv")
    unavailable = text.replace('"48,000,000,000"', '"n/a"')
    with pytest.raises(NcuCsvError, match=r"x.csv:7: ncu reported 'n/a' for metric 'dram__bytes.sum.per_second'"):
        parse_ncu_csv(unavailable, "x.csv")
    lacking = "\n".join(line for line in text.splitlines() if "fadd" not in line)
    with pytest.raises(NcuCsvError, match=r"lacks smsp__sass_thread_inst_executed_op_fadd.*--metrics"):
        program_roofline(parse_ncu_csv(lacking, "x.csv"), "x.csv")


def test_a_metric_ncu_could_not_collect_is_left_out_unless_the_score_needs_it():
    """An H200 with ncu 2025.3 (2026-11-27) wrote 'n/a' for the global-load sector efficiency of
    every kernel; the harness collects that metric but does not score it."""
    text = (FIXTURES / "ncu_copy_only.csv").read_text()
    lines = text.splitlines()
    (k,) = [i for i, line in enumerate(lines) if "sm__sass_average_data_bytes_per_sector_mem_global_op_ld.pct" in line]
    fields = lines[k].rsplit(",", 1)
    lines[k] = fields[0] + ',"n/a"'
    rows = parse_ncu_csv("\n".join(lines), "x.csv")
    assert len(rows) == len(read("ncu_copy_only.csv")) - 1
    program = program_roofline(rows)
    assert (program.bandwidth_utilisation, program.compute_efficiency, program.score) == pytest.approx(
        (0.75, 0.0, 0.75))


def test_a_forged_csv_beyond_the_peak_is_not_believed():
    forged = (FIXTURES / "ncu_copy_only.csv").read_text().replace('"48,000,000,000"', '"640,000,000,000"')
    program = program_roofline(parse_ncu_csv(forged))
    assert program.score == pytest.approx(10.0)
    with pytest.raises(NcuCsvError, match="bandwidth utilisation 10 is outside"):
        check_believable(program)
    check_believable(program_roofline(read("ncu_two_kernels.csv")))
