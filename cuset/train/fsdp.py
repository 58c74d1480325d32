"""Saving a LoRA model trained under accelerate's FSDP plugin (torch FSDP 1): two repairs.

`register_hidden_parameters` (after every training step) and `module_names_without_fsdp`
(around the save, see there). Without them `cuset train` under configs/accelerate/fsdp.yaml
crashed in its final save on one GPU, and, where it saved, wrote an adapter with no tensor.

With `use_orig_params=True` FSDP swaps each unit's original parameters for plain tensor
views in the forward and the pre-backward (so that autograd tracks them), and registers
the original `nn.Parameter`s again when the unit reshards: in its post-backward hook, or
in the catch-all reshard at the end of the backward for a unit whose hook did not run.
Under NO_SHARD (which FSDP uses for every unit when one process trains, replacing
FULL_SHARD with a warning) the catch-all skips every unit, because its check for
"already resharded" (the flat parameter points at its local shard) always holds there.
A unit without a post-backward hook (all of its parameters frozen: under LoRA the root
unit with the embeddings, final norm and LM head) therefore keeps the tensor views, and
on CPUs we saw frozen weights of the first decoder layer kept as tensors too.

Two failures follow. `module.state_dict()` lists registered parameters only, and FSDP's
FULL_STATE_DICT hook, which under NO_SHARD does not unshard (it expects the parameters to
be registered), raises "FSDP assumes <name> is in the state_dict" (the final save of
`cuset train` on one GPU). And the next forward's writeback check sees a tensor where
the parameter was, takes it for a parameter the user replaced and adopts the tensor as
the "original parameter" for good, after which no FSDP call registers a parameter again.
So the repair must run after every backward, before the next forward.
"""

from __future__ import annotations

import contextlib

import torch


def _hidden(handle) -> bool:
    """Whether some original parameter of this unit is not the module's attribute any more."""
    flat = handle.flat_param
    return any(getattr(module, name) is not param for param, (name, module, _) in zip(flat._params, flat._param_infos))


def register_hidden_parameters(model: torch.nn.Module) -> int:
    """After a backward: make each NO_SHARD unit with hidden parameters register them again,
    as its post-backward reshard would have. Returns how many units it repaired; a no-op
    without FSDP 1 units, and for sharded units (their reshard is not skipped).

    Uses FSDP's own reshard of the unit (`FlatParamHandle.reshard`, a private API: there is
    no public one that registers parameters without the writeback check described above).
    Under NO_SHARD it moves no data: the unit's parameters are whole on every rank."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy

    repaired = 0
    for unit in FSDP.fsdp_modules(model):
        handle = unit._handle
        if handle is None or not handle._use_orig_params or unit.sharding_strategy != ShardingStrategy.NO_SHARD:
            continue
        if _hidden(handle):
            handle.reshard(free_unsharded_flat_param=False)
            repaired += 1
    return repaired


FSDP_SEGMENT = "_fsdp_wrapped_module."


@contextlib.contextmanager
def module_names_without_fsdp(model: torch.nn.Module):
    """While open, `model.named_modules()` names every module as if no FSDP unit were nested inside.

    Why: PEFT (0.21) picks the adapter's entries of a state dict by the names of its LoRA
    layers from `named_modules()`, stripping FSDP's `_fsdp_wrapped_module.` only where it
    leads the name. Accelerate's FSDP plugin wraps each decoder layer in its own unit, so the
    layers' names carry that segment in the middle (`...layers.0._fsdp_wrapped_module.self_attn...`)
    while FSDP's full state dict cleans it from its keys: nothing matches, and `save_pretrained`
    writes an adapter without a single tensor, and says nothing. FSDP cleans its keys the same
    way (`clean_tensor_name`), so cleaning the module names makes the two agree again."""
    original = model.named_modules

    def named_modules(*args, **kwargs):
        for name, module in original(*args, **kwargs):
            yield name.replace(FSDP_SEGMENT, "").removesuffix("._fsdp_wrapped_module"), module

    model.named_modules = named_modules  # an instance attribute shadows the class's method
    try:
        yield
    finally:
        del model.named_modules
