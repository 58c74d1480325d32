"""Training objectives (CuSeT and baselines) over a chunked, exact LM head.

    from cuset.losses import LossConfig, compute_loss
    loss, metrics = compute_loss(model, batch, LossConfig(name="cuset"), num_items_in_batch=n)

Layout, in the order data flows:
  config.py      LossConfig (hyper-parameters with help text)
  tokens.py      target positions, sample ids, CUDA flags; chunked_token_stats
  head.py        the chunked LM head (custom autograd Functions)
  segments.py    sample runs and the sliding-window confidence
  objectives.py  the objectives as pure functions of TokenStats, registered by name
  compute.py     compute_loss: model forward -> head -> objective -> normalisation
  reference.py   the plain full-logits path (tests and benchmark yardstick)
"""

import importlib

# name -> submodule; loaded on first use, so `from cuset.losses import LossConfig` (configs,
# the CLI's checks) does not import torch
_EXPORTS = {
    "compute_loss": "compute", "count_loss_items": "compute", "final_hidden_states": "compute", "shift_batch": "compute",
    "REDUCTIONS": "config", "LOSS_NAMES": "config", "LossConfig": "config",
    "EAFT_ENTROPY_SCALE": "objectives", "LOSSES": "objectives", "Objective": "objectives", "get_loss": "objectives",
    "TokenStats": "stats", "chunked_token_stats": "tokens", "select_targets": "tokens",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"cuset.losses.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'cuset.losses' has no attribute {name!r}")
