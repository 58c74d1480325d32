"""cuset: CUDA-Sensitive Instruction Tuning, end to end.

Data flows through the sub-packages in this order:
tasks -> spans -> losses -> train -> generate -> execute -> evaluate -> analysis / data,
with the orchestration (`cuset.experiment`, then `cuset.demo`) and a thin CLI (`cuset.cli`)
on top; docs/architecture.md has the layer table tests/test_own_imports.py checks.
"""

__version__ = "0.1.0"
