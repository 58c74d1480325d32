"""CUDABench's efficiency metrics from Nsight Compute CSV (`ncu --metrics <NCU_METRICS> --csv`).

    rows = parse_ncu_csv(text, "kernel.csv")
    result = program_roofline(rows)
    result.bandwidth_utilisation, result.compute_efficiency, result.score

The definitions are the official harness's (`Evaluate/evaluator_core.py`, `eval_eff_only`),
written here from its description:

- each metric is averaged over the launches of a kernel (rows grouped by kernel name);
- peak FLOP/s = 2 x FFMA peak per cycle (`sm__..._ffma_pred_on.sum.peak_sustained`) x SM
  cycles per second; peak traffic = DRAM bytes per cycle peak x DRAM cycles per second;
- FLOP/s = (2 x FFMA + FMUL + FADD per cycle, single precision, summed over SM
  sub-partitions) x SMSP cycles per second; arithmetic intensity = FLOP/s / DRAM bytes/s;
- bandwidth utilisation (BU) = DRAM bytes/s / peak traffic; compute efficiency (CE) =
  FLOP/s / peak FLOP/s (0 without FLOPs);
- roofline score = FLOP/s / min(peak FLOP/s, intensity x peak traffic), or BU for a
  kernel without FLOPs (|FLOP/s| < 1e-9). (Algebraically the score is max(CE, BU).)
- a program of several kernels is scored by one of them, as the official harness does:
  the kernel with the highest FLOP/s when any has FLOPs, else the one with the highest
  DRAM bytes/s. Every kernel's metrics are kept (`ProgramRoofline.kernels`).

Units: ncu scales units unless told `--print-units base` (e.g. `Gbyte/second`,
`cycle/nsecond`); the `Metric Unit` column is read and values brought to base units
(bytes, cycles, seconds). The CSV is the profiled program's neighbour (ncu writes it
from inside the sandbox): every row is parsed strictly, and `check_believable` refuses
ratios no GPU reaches (a forged CSV can claim at most a plausible score).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

from cuset.errors import CusetError

DRAM_PEAK = "dram__bytes.sum.peak_sustained"
DRAM_CYCLES = "dram__cycles_elapsed.avg.per_second"
FFMA_PEAK = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"
DFMA_PEAK = "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"
SM_CYCLES = "sm__cycles_elapsed.avg.per_second"
DRAM_RATE = "dram__bytes.sum.per_second"
FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed"
FMUL = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"
DADD = "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed"
DMUL = "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed"
DFMA = "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed"
SMSP_CYCLES = "smsp__cycles_elapsed.avg.per_second"
LOAD_SECTOR = "sm__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"
# What the official harness asks ncu for (the double-precision ones are collected, not scored).
NCU_METRICS = (DRAM_PEAK, DRAM_CYCLES, FFMA_PEAK, DFMA_PEAK, SM_CYCLES, DRAM_RATE, FADD, FMUL, FFMA, DADD, DMUL,
               DFMA, SMSP_CYCLES, LOAD_SECTOR)
REQUIRED = (DRAM_PEAK, DRAM_CYCLES, FFMA_PEAK, SM_CYCLES, DRAM_RATE, FADD, FMUL, FFMA, SMSP_CYCLES)
NO_FLOPS = 1e-9                  # FLOP/s below this: a kernel without floating-point work
BELIEVABLE_RATIO = 1.5           # BU or CE beyond this is no measurement (counters are within ~1 of peak)
HEADER = ("ID", "Kernel Name", "Metric Name", "Metric Value")
PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
NCU_MESSAGE = re.compile(r"==[A-Z]+==")
PER_TIME = {"second": 1.0, "msecond": 1e3, "usecond": 1e6, "nsecond": 1e9}


class NcuCsvError(CusetError, ValueError):
    """Nsight Compute CSV that cannot be read (file, line and field in the message)."""


@dataclass(frozen=True)
class NcuRow:
    launch: str          # ncu's ID of the launch
    kernel: str
    metric: str
    value: float         # in base units


@dataclass(frozen=True)
class KernelRoofline:
    kernel: str
    launches: int
    flop_rate: float             # FLOP/s (single precision)
    dram_rate: float             # bytes/s
    peak_flop_rate: float
    peak_dram_rate: float
    bandwidth_utilisation: float
    compute_efficiency: float
    arithmetic_intensity: float  # FLOP per DRAM byte (inf without DRAM traffic)
    score: float

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["arithmetic_intensity"] = None if math.isinf(self.arithmetic_intensity) else self.arithmetic_intensity
        return d


@dataclass(frozen=True)
class ProgramRoofline:
    kernel: str                  # the kernel that scores the program
    bandwidth_utilisation: float
    compute_efficiency: float
    score: float
    kernels: tuple[KernelRoofline, ...] = field(default_factory=tuple)

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "bandwidth_utilisation": self.bandwidth_utilisation,
                "compute_efficiency": self.compute_efficiency, "score": self.score,
                "kernels": [k.to_json() for k in self.kernels]}


def unit_scale(unit: str) -> float:
    """Factor to base units: `Gbyte/second` -> 1e9, `cycle/nsecond` -> 1e9, `byte/cycle` -> 1, `%` -> 1."""
    unit = unit.strip()
    if not unit or unit == "%":
        return 1.0
    num, _, den = unit.partition("/")
    m = re.fullmatch(r"([KMGTP]?)([a-z]+)", num)
    scale = PREFIX[m.group(1)] if m else 1.0
    if den:
        d = re.fullmatch(r"([a-z]*second)", den)
        if d and d.group(1) in PER_TIME:
            scale *= PER_TIME[d.group(1)]
    return scale


def parse_ncu_csv(text: str, source: str = "ncu csv") -> list[NcuRow]:
    """The metric rows of ncu's CSV; lines before its header (==PROF== lines, the program's
    own output) are skipped. Raises NcuCsvError naming the line of a bad row."""
    # ncu's own messages (==PROF==, ==WARNING==, ==ERROR== lines) may come before and after the table
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if not NCU_MESSAGE.match(line)]
    start = next((i for i, (_, line) in enumerate(numbered) if all(f'"{h}"' in line for h in HEADER)), None)
    if start is None:
        raise NcuCsvError(f"{source}: no ncu CSV header (a line with {', '.join(HEADER)}); was ncu run with --csv "
                          "and did it profile any kernel?")
    reader = csv.DictReader(io.StringIO("\n".join(line for _, line in numbered[start:])))
    line_of = [n for n, _ in numbered[start + 1:]]
    rows = []
    for k, rec in enumerate(reader):
        offset = line_of[k] if k < len(line_of) else "?"   # one CSV record per line, as ncu writes them
        if rec.get("ID") is None or rec.get("Metric Value") is None:
            raise NcuCsvError(f"{source}:{offset}: a row with fewer columns than the header")
        raw = rec["Metric Value"].replace(",", "").strip()
        metric = (rec.get("Metric Name") or "").strip()
        if raw.lower() == "n/a":
            # ncu's word for a metric it could not collect for this kernel (seen on an H200 with
            # ncu 2025.3 for the global-load sector efficiency); only the score's inputs must exist
            if metric in REQUIRED:
                raise NcuCsvError(f"{source}:{offset}: ncu reported 'n/a' for metric {metric!r} of kernel "
                                  f"{rec['Kernel Name']!r}; the roofline score needs it, so this profile "
                                  "cannot be scored on this GPU/ncu")
            continue
        try:
            value = float(raw) * unit_scale(rec.get("Metric Unit") or "")
        except ValueError:
            raise NcuCsvError(f"{source}:{offset}: metric {rec['Metric Name']!r} of kernel {rec['Kernel Name']!r} "
                              f"has the value {rec['Metric Value']!r}, not a number") from None
        if not math.isfinite(value):
            raise NcuCsvError(f"{source}:{offset}: metric {rec['Metric Name']!r} is {raw}")
        rows.append(NcuRow(rec["ID"].strip(), rec["Kernel Name"], metric, value))
    if not rows:
        raise NcuCsvError(f"{source}: the ncu CSV has a header but no metric rows (no kernel was profiled)")
    return rows


def kernel_rooflines(rows: list[NcuRow], source: str = "ncu csv") -> list[KernelRoofline]:
    """Each kernel's metrics averaged over its launches, and its roofline numbers."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    launches: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        values[r.kernel][r.metric].append(r.value)
        launches[r.kernel].add(r.launch)
    out = []
    for kernel, metrics in values.items():
        n = len(launches[kernel])
        missing = [m for m in REQUIRED if len(metrics.get(m, ())) != n]
        if missing:
            raise NcuCsvError(f"{source}: kernel {kernel!r} lacks {', '.join(missing)} in some of its {n} launch(es); "
                              f"profile with --metrics {','.join(NCU_METRICS)}")
        mean = {m: sum(v) / n for m, v in metrics.items()}
        peak_flop = 2 * mean[FFMA_PEAK] * mean[SM_CYCLES]
        peak_dram = mean[DRAM_PEAK] * mean[DRAM_CYCLES]
        if peak_flop <= 0 or peak_dram <= 0:
            raise NcuCsvError(f"{source}: kernel {kernel!r}: the peaks are zero (peak FLOP/s {peak_flop:g}, "
                              f"peak bytes/s {peak_dram:g}); not a GPU's counters")
        flop = (2 * mean[FFMA] + mean[FMUL] + mean[FADD]) * mean[SMSP_CYCLES]
        dram = mean[DRAM_RATE]
        bu = dram / peak_dram
        intensity = flop / dram if dram > 0 else math.inf
        if abs(flop) < NO_FLOPS:
            ce, score = 0.0, bu
        else:
            ce = flop / peak_flop
            score = flop / min(peak_flop, intensity * peak_dram)
        out.append(KernelRoofline(kernel, n, flop, dram, peak_flop, peak_dram, bu, ce, intensity, score))
    return out


def program_roofline(rows: list[NcuRow], source: str = "ncu csv") -> ProgramRoofline:
    """The program's BU, CE and score: those of its kernel with the highest FLOP/s (any with
    FLOPs), else of the one with the highest DRAM bytes/s (the official harness's choice)."""
    kernels = kernel_rooflines(rows, source)
    with_flops = [k for k in kernels if k.flop_rate > 0]
    chosen = max(with_flops, key=lambda k: k.flop_rate) if with_flops else max(kernels, key=lambda k: k.dram_rate)
    return ProgramRoofline(chosen.kernel, chosen.bandwidth_utilisation, chosen.compute_efficiency, chosen.score,
                           tuple(kernels))


def check_believable(result: ProgramRoofline, source: str = "ncu csv") -> None:
    """Raise NcuCsvError for ratios no measurement gives (negative, or beyond BELIEVABLE_RATIO
    of the peak): the CSV was written next to the candidate's process."""
    for k in result.kernels:
        for name, v in (("bandwidth utilisation", k.bandwidth_utilisation),
                        ("compute efficiency", k.compute_efficiency)):
            if not 0 <= v <= BELIEVABLE_RATIO:
                raise NcuCsvError(f"{source}: kernel {k.kernel!r}: {name} {v:.3g} is outside [0, "
                                  f"{BELIEVABLE_RATIO}]: not believed")
