"""KernelBench timing harness: runs INSIDE the sandbox on the GPU backend
(`python -I kb_timing_harness.py config.json`), next to copies of the verification
harness (harness.py: loading, transport, load_inline) and timing.py.

Standalone (torch, safetensors and the two sibling files; never cuset). One process
times ONE side, so the candidate never shares a process with the reference's timing:

- role "reference": seeds and builds `Model` and one input set (seed `seed`, as the
  verification does), writes the inputs (`inputs/`, for the candidate run) and the
  outputs (`expected/c0_t0`, read by the parent only), then times the eager forward
  and, with `compile`, `torch.compile(model)`'s;
- role "candidate": builds `ModelNew` under the same seed from the reference's init
  inputs, times its forward on those inputs and writes the outputs of the last timed
  call (`outputs/c0_t0`): the parent compares them with the reference's, so a
  timed forward that computes something else is `failed`, not fast.

Both sides alternate two input sets in place: the reference's inputs under `seed`
(`inputs/c0_t0`, the warm-up's) and under `seed + 1` (`inputs/c0_t1`, when `get_inputs`
gives the same shapes and dtypes again), copied into the same input tensors before each
timed trial (untimed, before the L2 flush): trial k uses the second set when k is even.
The outputs compared are the last trial's, so an answer that returns what it computed for
the same tensors earlier (a cache keyed on the tensor or its pointer) is `failed`; every
trial's outputs are checked too, by their float64 sums and sums of absolute values against
the reference's for the same trial (`trial_sums`), so computing only the last trial is too. The seed
is fresh per answer unless the user fixed it, and the config file and the candidate's copy of
the inputs are removed before the answer is imported: it cannot compute its outputs ahead.

The CUDA events, synchronize, L2 size and flush buffer are bound BEFORE the candidate
is imported (timing.CudaEventTimer). Trial times go to `timing.json`; the parent
believes them only within bounds (cuset.execute.perf.claims) and its own clock.

`device` "cpu" (tests only: cuset.evaluate.perf.kernelbench_runner never passes it) runs
the same steps on the CPU with the host clock, so the harness's logic is tested on
machines without a GPU.
"""

import json
import os
import shutil
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # -I leaves the script's dir off sys.path

import harness  # noqa: E402  (the verification harness, copied next to this file)
import timing  # noqa: E402

# What times the answer and writes its record, bound before the answer is imported: an answer
# that replaces harness.write_json or timing.time_trials afterwards changes neither (the static
# rule timing_patch flags answers that reach into the harness at all).
TIME_TRIALS, WRITE_JSON = timing.time_trials, harness.write_json


BOUND = {}   # torch's copy_, sum and abs, bound in main before any answer code runs


@dataclass(frozen=True)
class Run:
    """What every step of this process reads: its config, its steps (harness.Steps: the
    watchdog), the timer and the L2 flush (both bound in main before any answer code runs)."""

    cfg: dict
    steps: object
    timer: object
    flush: object


def time_model(model, inputs, sets, run, what, sums=None):
    """Trial times of `model(*inputs)` and the last trial's outputs; with `sets` (two input sets
    on the device), each trial's set is first copied into `inputs` in place. With `sums` (a
    list), each trial's output checksums are appended to it after the trial (untimed)."""
    import torch

    cfg = run.cfg
    with run.steps.step(f"time {what}", cfg["step_timeout"]):
        with torch.no_grad():
            box = {}

            def forward():
                box["out"] = model(*inputs)

            times = TIME_TRIALS(forward, warmup=cfg["warmup"], trials=cfg["trials"], timer=run.timer,
                                flush=before_each_trial(inputs, sets, run.flush),
                                after=None if sums is None else lambda: sums.append(checksums(box.get("out"))))
    return times, box.get("out")


def checksums(out):
    """[sum, sum of |x|, numel] in float64 of each tensor output: the parent holds every trial's
    against the reference's (an answer cannot compute only the trial it guesses is checked)."""
    total, absolute = BOUND["sum"], BOUND["abs"]
    return [[float(total(t, dtype=BOUND["float64"])), float(total(absolute(t), dtype=BOUND["float64"])), t.numel()]
            if hasattr(t, "data_ptr") else None for t in harness.flatten(out)]


def before_each_trial(inputs, sets, flush):
    """What runs before each timed trial: trial k's input set copied in (the second set when
    k is even, the first, the warm-up's, when odd), then the flush."""
    if sets is None:
        return flush
    copy, trial = BOUND["copy"], [0]
    tensors = [k for k, x in enumerate(inputs) if hasattr(x, "data_ptr")]

    def prepare():
        source = sets[(trial[0] + 1) % 2]
        trial[0] += 1
        for k in tensors:
            copy(inputs[k], source[k])
        if flush is not None:
            flush()
    return prepare


def second_input_set(mod, cfg, first):
    """`get_inputs()` under seed + 1 when it has the first set's structure (tensors of the same
    shapes and dtypes where the first has tensors, equal values elsewhere), else None."""
    import torch

    torch.manual_seed(cfg["seed"] + 1)
    second = list(mod.get_inputs())
    if len(second) != len(first):
        return None
    for a, b in zip(first, second):
        if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
            return None
        if isinstance(a, torch.Tensor):
            if a.shape != b.shape or a.dtype != b.dtype:
                return None
        elif type(a) is not type(b) or not _equal(a, b):
            return None
    return second


def _equal(a, b):
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001  (a value without a plain truth: treat as different)
        return False


def on_device(torch, values, device):
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in values]


def live_copies(torch, values):
    """The tensors the model is called with: copies, so both sets stay intact to copy from."""
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in values]


def reference(run):
    import torch

    cfg, steps = run.cfg, run.steps
    with steps.step("import reference", cfg["import_timeout"]):
        mod = harness.load_module("reference", cfg["reference_path"])
    torch.manual_seed(cfg["seed"])
    init = mod.get_init_inputs()
    shared = {}
    harness.save(cfg["inputs_dir"], "c0", {"init": harness.encode(list(init), shared, "init")}, shared)
    torch.manual_seed(cfg["seed"])
    model = mod.Model(*init).to(cfg["device"]).eval()
    torch.manual_seed(cfg["seed"])
    first = list(mod.get_inputs())
    second = second_input_set(mod, cfg, first)
    for stem, values in (("c0_t0", first), ("c0_t1", second)):
        if values is not None:
            shared = {}
            harness.save(cfg["inputs_dir"], stem, {"inputs": [harness.encode(x, shared, f"in.{k}")
                                                              for k, x in enumerate(values)]}, shared)
    sets = None if second is None else [on_device(torch, first, cfg["device"]), on_device(torch, second, cfg["device"])]
    inputs = live_copies(torch, on_device(torch, first, cfg["device"]))
    sums = []
    eager, out = time_model(model, inputs, sets, run, "eager reference", sums)
    expected = {}
    harness.save(cfg["expected_dir"], "c0_t0", {"outputs": [harness.encode(o, expected, f"out.{k}")
                                                            for k, o in enumerate(harness.flatten(out))]}, expected)
    record = {"status": "ran", "eager_ms": eager, "inputs_alternate": sets is not None, "trial_sums": sums,
              "device": torch.cuda.get_device_name(0) if cfg["device"] == "cuda" else cfg["device"]}
    if cfg.get("compile"):
        with steps.step("torch.compile reference", cfg["compile_timeout"]):
            compiled = torch.compile(model)
            with torch.no_grad():
                compiled(*inputs)   # compiles here, not in a timed trial
        record["compile_ms"], _ = time_model(compiled, inputs, sets, run, "compiled reference")
    return record


def candidate(run):
    import torch

    cfg, steps = run.cfg, run.steps

    harness.install_extensions(harness.GpuExtensions(cfg["build_dir"], cfg.get("extensions")))
    init_meta, init_tensors = harness.load(cfg["inputs_dir"], "c0")
    # both input sets are read before the answer is imported (cfg["alternate"]: the reference had two),
    # and then removed with the inputs folder: the answer never sees its inputs before it is called
    loaded = [harness.load(cfg["inputs_dir"], stem) for stem in (("c0_t0", "c0_t1") if cfg["alternate"] else ("c0_t0",))]
    shutil.rmtree(cfg["inputs_dir"])
    with steps.step("import candidate", cfg["import_timeout"]):
        mod = harness.load_module("candidate", cfg["candidate_path"])
    torch.manual_seed(cfg["seed"])
    model = mod.ModelNew(*harness.decode(init_meta["init"], init_tensors, "cpu")).to(cfg["device"]).eval()
    values = [harness.decode({"l": meta["inputs"]}, tensors, cfg["device"]) for meta, tensors in loaded]
    sets = values if cfg["alternate"] else None
    inputs = live_copies(torch, values[0])
    sums = []
    times, out = time_model(model, inputs, sets, run, "candidate", sums)
    written = {}
    harness.save(cfg["outputs_dir"], "c0_t0", {"outputs": [harness.encode(o, written, f"out.{k}")
                                                           for k, o in enumerate(harness.flatten(out))]}, written)
    return {"status": "ran", "candidate_ms": times, "inputs_alternate": sets is not None, "trial_sums": sums}


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    os.remove(sys.argv[1])   # the seed and the paths stay in this process: the answer cannot read them from the file
    cfg.setdefault("device", "cuda")
    steps = harness.Steps(cfg)
    try:
        with steps.step("import torch", cfg["import_timeout"]):
            import torch

            BOUND.update(copy=torch.Tensor.copy_, sum=torch.sum, abs=torch.abs, float64=torch.float64)
            if cfg["device"] == "cuda":
                torch.cuda.init()
                timer = timing.CudaEventTimer(torch)   # bound before any answer code runs
                l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or (50 << 20)
                flush = timing.l2_flush(torch, "cuda", l2)
            else:
                timer, flush = timing.HostTimer(), None
        record = (reference if cfg["role"] == "reference" else candidate)(Run(cfg, steps, timer, flush))
    except harness.Verdict as v:
        record = v.record
    except BaseException as e:  # the candidate's failure (or SystemExit from it)
        head, tb = harness.exc_summary(e)
        record = {"status": "runtime_error", "detail": f"{head} ({steps.current.get('step', '')})", "log": tb}
    WRITE_JSON(cfg["timing_path"], record)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
