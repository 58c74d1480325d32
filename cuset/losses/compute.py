"""`compute_loss`: the one call the trainer makes per micro-batch.

    loss, metrics = compute_loss(model, batch, cfg, num_items_in_batch=n_tokens_in_step, world_size=ws)
    loss.backward()

Normalisation: `reduction=token` divides the summed
loss by the supervised tokens of the *whole optimizer step* (all accumulated
micro-batches on all devices; transformers' `num_items_in_batch`); the sample
reductions divide by the supervised samples of the step (`num_samples_in_batch`).
Without them this micro-batch's own count is used. `reduction=micro_batch_mean`
divides by this micro-batch's tokens and by the step's micro-batches on all devices
(`num_micro_batches`, default 1), as LLaMA-Factory averages ASFT. The result is multiplied by
`world_size` because DDP averages gradients over processes; pass world_size=1
when your trainer already does that scaling itself (HF Trainer with
`average_tokens_across_devices` and a model that accepts loss kwargs does).
`count_loss_items(batch)` gives the per-micro-batch counts to sum.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

import torch

from cuset.losses import fused
from cuset.losses.config import LossConfig
from cuset.losses.head import IGNORE_INDEX, weighted_terms_fn
from cuset.losses.objectives import Objective, get_loss
from cuset.losses.segments import segment_runs
from cuset.losses.stats import TokenStats
from cuset.losses.tokens import Targets, select_targets

# more per-sample weight-gradient accumulators than this (each [vocab, hidden]) and a
# trainable head's weight gradient is recomputed in backward instead
MAX_WEIGHT_GROUPS = 2


@dataclass(frozen=True)
class ShiftedBatch:
    labels: torch.Tensor  # [B, T-1]: labels[:, t] is predicted from position t
    segment_ids: torch.Tensor | None  # [B, T-1] sample id of the target, None: one sample per row
    cuda_mask: torch.Tensor | None  # [B, T-1] CUDA flag of the target token
    loss_weight: torch.Tensor | None = None  # [B, T-1] loss weight of the target token (None: all 1)


def sample_ids(batch: dict) -> torch.Tensor | None:
    """[B, T] ids of the samples packed in each row, or None for one sample per row.

    From `segment_ids` if given, else from `position_ids` restarting at 0
    (padding-free packing), else None.
    """
    if batch.get("segment_ids") is not None:
        return batch["segment_ids"]
    pos = batch.get("position_ids")
    if pos is None:
        return None
    restarts = pos == 0
    restarts[:, 0] = True
    if int(restarts.sum()) == pos.shape[0]:
        return None
    return torch.cumsum(restarts.long(), dim=1)


def shift_batch(batch: dict) -> ShiftedBatch:
    """Align HF (unshifted) labels and per-token columns with the positions that predict them."""
    for key in ("input_ids", "labels"):
        if key not in batch:
            raise ValueError(f"batch: missing {key!r} (keys: {', '.join(batch)})")
    labels = batch["labels"]
    shape = batch["input_ids"].shape
    for key in ("labels", "attention_mask", "cuda_mask", "loss_weight", "segment_ids", "position_ids"):
        if batch.get(key) is not None and batch[key].shape != shape:
            raise ValueError(f"batch: {key} has shape {tuple(batch[key].shape)} but input_ids have {tuple(shape)}; "
                             "truncate/pad every per-token column together")
    targets = labels[:, 1:].clone()
    if batch.get("attention_mask") is not None:
        targets[batch["attention_mask"][:, 1:] == 0] = IGNORE_INDEX
    seg = sample_ids(batch)
    if seg is not None:
        targets[seg[:, 1:] != seg[:, :-1]] = IGNORE_INDEX  # never predict a sample's first token from the previous one
        seg = seg[:, 1:]
    cuda, weight = batch.get("cuda_mask"), batch.get("loss_weight")
    return ShiftedBatch(targets, seg, None if cuda is None else cuda[:, 1:], None if weight is None else weight[:, 1:])


def count_loss_items(batch: dict) -> dict[str, int]:
    """Supervised tokens and samples of one micro-batch (sum them over the step for the denominators)."""
    shifted = shift_batch(batch)
    targets = select_targets(shifted.labels, vocab_size=torch.iinfo(torch.int64).max,
                             segment_ids=shifted.segment_ids)
    return {"tokens": targets.n_tokens, "samples": targets.n_samples}


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """Strip DDP/FSDP-style `.module` wrappers."""
    while hasattr(model, "module") and isinstance(model.module, torch.nn.Module):
        model = model.module
    return model


def _causal_lm(model: torch.nn.Module) -> torch.nn.Module:
    model = _unwrap(model)
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _check_plain_head(lm: torch.nn.Module):
    cfg = getattr(lm, "config", None)
    for key, neutral in (("final_logit_softcapping", None), ("logit_scale", 1.0), ("logits_scaling", 1.0)):
        value = getattr(cfg, key, neutral)
        if value is not None and value != neutral:
            raise NotImplementedError(f"{type(lm).__name__}: config.{key}={value} transforms the logits; "
                                      "the chunked LM head computes plain hidden @ W^T (+ b) only")


def final_hidden_states(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    """Last hidden states [B, T, H] from a forward through `model` itself (so DDP/peft hooks run),
    with `logits_to_keep=1` so the LM head scores one position instead of all of them."""
    lm = _causal_lm(model)
    _check_plain_head(lm)
    decoder = lm.get_decoder()
    captured: dict[str, torch.Tensor] = {}

    def grab(_module, _args, output):
        captured["h"] = output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]

    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids") if batch.get(k) is not None}
    handle = decoder.register_forward_hook(grab)
    try:
        model(**inputs, logits_to_keep=1, use_cache=False)
    except TypeError as err:
        if "logits_to_keep" not in str(err):
            raise
        raise TypeError(f"{type(lm).__name__}.forward does not accept logits_to_keep (transformers >= 4.50 models "
                        "do); without it the model would compute full [tokens, vocab] logits") from None
    finally:
        handle.remove()
    if "h" not in captured:
        raise RuntimeError(f"{type(lm).__name__}.get_decoder() was not called during the forward pass")
    return captured["h"]


def needs_step_weights(cfg: LossConfig) -> bool:
    """Whether the loss needs the step's mean sample weight (`step_weight_mean`) before its micro-batches."""
    return cfg.weight_norm and get_loss(cfg.name).sample_weights is not None


@torch.no_grad()
def sample_weight_totals(model: torch.nn.Module, batch: dict, cfg: LossConfig) -> tuple[torch.Tensor, int]:
    """(sum of the sample weights w_n, number of samples) of one micro-batch under the current
    model, without gradients: the extra forward pass that gives cfg.weight_norm the mean w_n of
    a step of several micro-batches before the first of them is backpropagated."""
    from cuset.losses.tokens import chunked_token_stats

    obj = get_loss(cfg.name)
    shifted = shift_batch(batch)
    head = _head_module(_causal_lm(model))
    if not bool((shifted.labels != IGNORE_INDEX).any()):
        return torch.zeros((), dtype=torch.float64), 0
    hidden = final_hidden_states(model, batch)[:, :-1]  # plain module weights: not inside a ZeRO-3 / FSDP shard
    plain = chunked_token_stats(hidden, head.weight, head.bias, shifted.labels, chunk_size=cfg.chunk_size,
                                segment_ids=shifted.segment_ids, cuda_mask=shifted.cuda_mask,
                                loss_weight=shifted.loss_weight).detached()
    runs = segment_runs(plain.segment)
    return obj.weights(plain, runs, cfg).double().sum(), runs.count


def _reference_hidden(model, batch: dict, ref_model_ctx) -> tuple[torch.Tensor, torch.nn.Module]:
    """Hidden states of pi_ref (no grad) and the module whose LM head scores them."""
    with torch.no_grad():
        if isinstance(ref_model_ctx, torch.nn.Module):  # full fine-tune: a separate frozen copy
            return final_hidden_states(ref_model_ctx, batch), _causal_lm(ref_model_ctx)
        if ref_model_ctx is None:
            peft_model = _unwrap(model)
            if not hasattr(peft_model, "disable_adapter"):
                raise ValueError("ASFT needs the reference model: with LoRA pass the peft model (its adapter is "
                                 "disabled for the reference pass); for a full fine-tune pass ref_model_ctx=<frozen "
                                 "copy of the initial model>")
            ref_model_ctx = peft_model.disable_adapter
        with ref_model_ctx():
            # through the wrapper: FSDP / ZeRO-3 gather the parameters only inside their own forward
            return final_hidden_states(model, batch), _causal_lm(model)


def _weight_groups(obj: Objective, cfg: LossConfig, segment: torch.Tensor) -> torch.Tensor | None:
    """Tokens whose upstream gradient is equal: per sample if samples are scaled differently."""
    per_sample = obj.sample_weights is not None or cfg.reduction == "sample_mean"
    if not per_sample:
        return torch.zeros_like(segment)
    runs = segment_runs(segment)
    return runs.index if runs.count <= MAX_WEIGHT_GROUPS else None


def _head_module(lm: torch.nn.Module) -> torch.nn.Module:
    """The LM head module whose own forward we take over (inside an FSDP1 wrapper if it has its own unit)."""
    head = lm.get_output_embeddings()
    if head is None or not isinstance(getattr(head, "weight", None), torch.Tensor):
        raise NotImplementedError(f"{type(lm).__name__}: no linear output embedding (get_output_embeddings() = "
                                  f"{type(head).__name__}); the chunked LM head needs hidden @ W^T (+ b)")
    return getattr(head, "_fsdp_wrapped_module", head)


def vocab_size(head: torch.nn.Module) -> int:
    """Rows of the LM head, also when the weight is a shard or ZeRO-3's empty placeholder outside the forward."""
    if getattr(head, "out_features", None):
        return int(head.out_features)
    shape = getattr(head.weight, "ds_shape", None)  # DeepSpeed ZeRO-3 keeps the full shape here
    return int(shape[0]) if shape is not None else int(head.weight.shape[0])


@contextlib.contextmanager
def head_forward_replaced(head: torch.nn.Module, forward: Callable[[torch.Tensor], torch.Tensor]):
    """While open, calling `head(hidden)` returns `forward(hidden)` instead of logits.

    Why the loss is computed *inside* the head's own call (the model's forward calls
    it as usual): every sharding framework makes a module's full weight available
    exactly during that module's call and arranges for it again in backward.
    DeepSpeed ZeRO-3 gathers a module's partitioned parameters in its pre-forward
    hook, releases them after, and re-gathers them in backward through hooks on the
    module's outputs; FSDP (1 and 2) holds the unit's flat parameters unsharded for
    the whole forward of the unit owning the head (the root unit, with tied
    embeddings too) and re-gathers them for backward through hooks on its outputs.
    Reading `lm_head.weight` after the forward instead sees an empty placeholder
    (ZeRO-3) or a flat shard (FSDP). Gathering explicitly with each framework's API
    would work as well but needs one code path per framework and puts the weight's
    gradient back by hand; here the frameworks' own hooks do both, and the head's
    memory stays chunked because `forward` never builds [tokens, vocab] logits.
    The loss must be derived from the value the call returns (frameworks wrap that
    value to hook backward), hence the model output's `logits` carries the loss.
    """
    had = "forward" in head.__dict__
    previous = head.__dict__.get("forward")
    head.forward = forward  # an instance attribute shadows the class's forward; hooks still run around it
    try:
        yield
    finally:
        if had:
            head.forward = previous
        else:
            del head.forward


def compute_loss(model: torch.nn.Module, batch: dict, cfg: LossConfig, *, num_items_in_batch: Any = None,
                 num_samples_in_batch: Any = None, num_micro_batches: Any = None, world_size: int = 1,
                 step_weight_mean: Any = None,
                 ref_model_ctx: torch.nn.Module | Callable[[], contextlib.AbstractContextManager] | None = None,
                 ) -> tuple[torch.Tensor, dict[str, float]]:
    """(loss, metrics) of `cfg.name` on one micro-batch; see the module docstring for normalisation.

    batch: input_ids, labels (HF unshifted, -100 = no target), optional attention_mask,
    cuda_mask (per token, like input_ids), loss_weight (per-token multiplier of the loss terms,
    e.g. data.reasoning_weight on reasoning tokens; the denominators still count every target),
    position_ids / segment_ids (packing).
    ref_model_ctx (ASFT): None = peft model with its adapter disabled; a module = frozen
    reference model; a callable = context manager under which `model` is the reference.
    step_weight_mean (cfg.weight_norm): the mean sample weight w_n over every sample of the
    optimizer step (`sample_weight_totals` summed over its micro-batches and ranks, divided by
    their sample count); None: this micro-batch's own mean, which is the step's when the step
    is one micro-batch on one process.
    Works unchanged under DDP, FSDP and DeepSpeed ZeRO-2/3 (see `head_forward_replaced`).
    """
    obj = get_loss(cfg.name)
    needs_cuda = obj.name == "cuset" and cfg.cuda_mask and cfg.lam != 0
    if needs_cuda and batch.get("cuda_mask") is None:
        raise ValueError("batch: loss 'cuset' with cuda_mask=True needs a per-token 'cuda_mask' column "
                         "(from the span detector); set loss.cuda_mask=false to train without it")
    shifted = shift_batch(batch)
    lm = _causal_lm(model)
    _check_plain_head(lm)
    head = _head_module(lm)
    targets = select_targets(shifted.labels, vocab_size=vocab_size(head), segment_ids=shifted.segment_ids,
                             cuda_mask=shifted.cuda_mask, loss_weight=shifted.loss_weight, where="batch")
    ref_h = ref_head = None
    if targets.n_tokens and obj.needs_kl(cfg):  # the reference pass first: its hidden states feed the head's pass
        ref_hidden, ref_lm = _reference_hidden(model, batch, ref_model_ctx)
        ref_h, ref_head = ref_hidden[:, :-1][targets.mask], _head_module(ref_lm)
    results: dict[str, Any] = {}

    def loss_in_head(hidden: torch.Tensor) -> torch.Tensor:
        if hidden.dim() != 3 or hidden.shape[:2] != batch["input_ids"].shape:
            raise RuntimeError(f"{type(lm).__name__} called its LM head on hidden states of shape "
                               f"{tuple(hidden.shape)}, expected [batch, tokens, hidden] for logits_to_keep=0")
        if targets.n_tokens == 0:
            return _empty_loss(hidden, head)
        with _gathered_frozen(ref_head):
            loss_sum, plain, metrics = head_loss_sum(
                cfg, hidden[:, :-1][targets.mask], head.weight, head.bias, targets, ref_hidden=ref_h,
                ref_weight=None if ref_head is None else ref_head.weight,
                ref_bias=None if ref_head is None else ref_head.bias, weight_mean=step_weight_mean)
        results.update(plain=plain, metrics=metrics)
        return loss_sum

    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids") if batch.get(k) is not None}
    with head_forward_replaced(head, loss_in_head):
        try:
            out = model(**inputs, logits_to_keep=0, use_cache=False)
        except TypeError as err:
            if "logits_to_keep" not in str(err):
                raise
            raise TypeError(f"{type(lm).__name__}.forward does not accept logits_to_keep (transformers >= 4.50 "
                            "models do)") from None
    loss_sum = out["logits"] if isinstance(out, dict) else out[0]
    if targets.n_tokens == 0:
        return loss_sum, _empty_metrics()
    if "plain" not in results:
        raise RuntimeError(f"{type(lm).__name__}.forward did not call its output embedding "
                           f"({type(head).__name__}); the loss is computed inside that call")
    loss = loss_sum / _denominator(cfg, targets, num_items_in_batch, num_samples_in_batch, num_micro_batches) \
        * world_size
    return loss, _to_floats(loss, results["plain"], results["metrics"], targets)


@contextlib.contextmanager
def _gathered_frozen(head: torch.nn.Module | None):
    """A frozen reference head partitioned by DeepSpeed ZeRO-3, gathered for reading (no gradient)."""
    params = [] if head is None else [p for p in head.parameters(recurse=False) if hasattr(p, "ds_id")]
    if not params:
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(params, modifier_rank=None):
        yield


def head_loss_sum(cfg: LossConfig, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                  targets: Targets, *, ref_hidden: torch.Tensor | None = None, ref_weight: torch.Tensor | None = None,
                  ref_bias: torch.Tensor | None = None, weight_mean: torch.Tensor | float | None = None,
                  ) -> tuple[torch.Tensor, TokenStats, dict[str, torch.Tensor]]:
    """(loss_sum, detached TokenStats, metric tensors) for gathered target hidden states [N, H].
    `weight_mean`: the step's mean sample weight for cfg.weight_norm (None: these samples' own).

    The objective's token coefficients are folded into the chunked head's single pass
    (`weighted_terms_fn`), or applied to the fused head's per-token logp (`cuset.losses.fused`,
    chosen by cfg.head); its per-sample scales are applied here.
    """
    obj = get_loss(cfg.name)
    impl = fused.choose_impl(cfg, hidden, needs_entropy=obj.needs_entropy, needs_kl=obj.needs_kl(cfg),
                             has_bias=bias is not None)
    if impl is not None:
        return _fused_loss_sum(obj, cfg, hidden, weight, targets, impl, weight_mean)
    terms, logp, kl, entropy = weighted_terms_fn(
        hidden, weight, bias, targets.ids,
        coefs=lambda chunk: obj.coefs(chunk, cfg), segment=targets.segment, cuda=targets.cuda,
        weight_groups=_weight_groups(obj, cfg, targets.segment),
        topk=cfg.eaft_topk if obj.needs_entropy else None, ref_hidden=ref_hidden,
        ref_weight=None if ref_weight is None else ref_weight.detach(),
        ref_bias=None if ref_bias is None else ref_bias.detach(),
        chunk_size=cfg.chunk_size, token_weight=targets.weight)
    plain = TokenStats(logp, targets.segment, targets.cuda, entropy, kl, targets.weight)
    loss_sum, metrics = obj.reduce(terms, plain, cfg, weight_mean=weight_mean)
    return loss_sum, plain, metrics


def _fused_loss_sum(obj: Objective, cfg: LossConfig, hidden: torch.Tensor, weight: torch.Tensor, targets: Targets,
                    impl: str, weight_mean) -> tuple[torch.Tensor, TokenStats, dict[str, torch.Tensor]]:
    """head_loss_sum through the fused head: the coefficients are tensor operations on sg(logp)."""
    logp = fused.token_logp(hidden, weight, targets.ids, impl=impl)
    plain = TokenStats(logp.detach(), targets.segment, targets.cuda, None, None, targets.weight)
    a, _ = obj.coefs(plain, cfg)  # b is None: objectives with a KL term are not served (fused.unserved_reason)
    loss_sum, metrics = obj.reduce(-a * logp, plain, cfg, weight_mean=weight_mean)
    return loss_sum, plain, metrics


def _denominator(cfg: LossConfig, targets: Targets, num_items_in_batch, num_samples_in_batch,
                 num_micro_batches=None) -> float:
    if cfg.reduction == "token":
        count = targets.n_tokens if num_items_in_batch is None else num_items_in_batch
    elif cfg.reduction == "micro_batch_mean":
        micro = 1 if num_micro_batches is None else num_micro_batches
        return max(float(targets.n_tokens), 1.0) * max(float(micro), 1.0)
    else:
        count = targets.n_samples if num_samples_in_batch is None else num_samples_in_batch
    return max(float(count), 1.0)


def _empty_loss(hidden: torch.Tensor, head: torch.nn.Module) -> torch.Tensor:
    """0 with zero (finite) gradients reaching every parameter the loss normally touches
    (called inside the head's forward, so sharded parameters are whole here)."""
    loss = hidden.sum() * 0.0
    for p in head.parameters(recurse=False):
        if p.requires_grad:
            loss = loss + p.sum() * 0.0
    return loss


def _empty_metrics() -> dict[str, float]:
    keys = ("loss", "nll", "conf_kept_frac", "dropped_frac", "cuda_frac", "w_mean", "w_min", "w_max", "n_tokens", "n_samples")
    return {k: 0.0 for k in keys}


def _to_floats(loss, plain: TokenStats, metrics: dict, targets: Targets) -> dict[str, float]:
    names = ["loss", "nll", *metrics]
    values = torch.stack([loss.detach().float(), -plain.logp.float().mean(), *(v.float() for v in metrics.values())])
    out = dict(zip(names, values.tolist()))  # one device sync for all of them
    out["n_tokens"] = float(targets.n_tokens)
    out["n_samples"] = float(targets.n_samples)
    return out
