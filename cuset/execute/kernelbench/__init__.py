"""KernelBench execution: a candidate (`ModelNew` plus `load_inline` CUDA sources)
verified against the task's PyTorch reference, in the sandbox.

    from cuset.execute.kernelbench import VerifyOptions, plain_checks, verify
    v = verify(reference_src, candidate_src, plain_checks(5), options=VerifyOptions(backend="cpu"))
    v.status, v.detail, v.check, v.trial, v.max_abs_err

- `build`: the CPU build of `load_inline` extensions (cuset rewriter, position-
  independent CPU runtime, one precompiled header with Python.h + torch/types.h +
  pybind-free bindings, content-addressed through the compile cache). Measured on
  the shared 2-core machine (other agents compiling): the precompiled header and
  PIC runtime once per toolchain 115-140 s; a new extension 6.3 s wall at load ~1.3
  (10.5 s of compiler CPU: two translation units side by side, each at least ~4 s,
  the cost of an empty unit from the 430 MB header), 10-15 s under heavier load; a
  cached one ~1-10 ms; loading it ~1 ms. For comparison, a unit including
  torch/extension.h (pybind11): 16.5 s for an empty one from its precompiled header,
  ~34 s without one.
- `harness.py`: the trusted script run inside the sandbox (seeded trials, shape and
  value variants, backward check, device mapping to the CPU, per-step watchdog,
  extension requests that end the run, counts of the candidate's kernel launches).
- `options.VerifyOptions`: how to verify (backend, tolerances, timeouts, limits, environment),
  the one record `verify` and the harness runs take.
- `verify`: the parent side (static discovery of load_inline calls, builds on
  demand, refusals, runs, verdict, KernelEvidence). cuset.evaluate.kernelbench.evaluate_kernelbench builds on it.
"""

from cuset.execute.kernelbench.build import ExtensionBuilder, ExtensionSpec
from cuset.execute.kernelbench.options import VerifyOptions
from cuset.execute.kernelbench.verify import Check, KbVerdict, extract_specs, plain_checks, verify

__all__ = ["ExtensionBuilder", "ExtensionSpec", "Check", "KbVerdict", "VerifyOptions", "extract_specs", "plain_checks",
           "verify"]
