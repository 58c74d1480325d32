"""Load the model and tokenizer, and wrap the model for LoRA, QLoRA or full fine-tuning."""

from __future__ import annotations

import logging
import os

import torch

from cuset.train.config import LoraOptions, ModelConfig, TrainConfig
from cuset.train.errors import SetupError

log = logging.getLogger(__name__)


def resolve_dtype(name: str) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load_tokenizer(cfg: ModelConfig):
    from transformers import AutoTokenizer

    cfg.check_exists()
    try:
        tok = AutoTokenizer.from_pretrained(cfg.name_or_path, revision=cfg.revision,
                                            trust_remote_code=cfg.trust_remote_code)
    except (OSError, ValueError) as e:  # an unresolvable hub id, no network, a directory without tokenizer files
        raise SetupError(f"model.name_or_path: cannot load a tokenizer from {cfg.name_or_path!r}: {e}") from None
    if not getattr(tok, "is_fast", False):
        raise SetupError(f"{cfg.name_or_path}: training needs a fast tokenizer (character offsets for the CUDA mask)")
    if tok.pad_token_id is None:  # padding positions are masked out, any id will do
        tok.pad_token = tok.eos_token
    return tok


# the first bitsandbytes whose 4-bit layers we ran forward and backward on a CPU (older ones need CUDA)
BNB_CPU_MIN = (0, 50)


def _quantization_config(dtype: torch.dtype):
    try:
        from transformers import BitsAndBytesConfig
        import bitsandbytes
    except ImportError:
        raise SetupError("finetune=qlora needs bitsandbytes: pip install 'cuset[qlora]' (or set finetune=lora)") from None
    version = tuple(int(x) for x in bitsandbytes.__version__.split(".")[:2] if x.isdigit())
    if not torch.cuda.is_available() and version < BNB_CPU_MIN:
        raise SetupError(f"finetune=qlora on a CPU needs bitsandbytes >= {'.'.join(map(str, BNB_CPU_MIN))} "
                         f"(installed: {bitsandbytes.__version__}, whose 4-bit layers need CUDA); upgrade it or "
                         "set finetune=lora")
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=dtype)


def _process_device() -> str:
    """Quantised weights are placed at load time: on this process's GPU (one per rank) or the CPU."""
    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    return "cpu"


def load_base_model(cfg: ModelConfig, *, quantized: bool = False):
    from transformers import AutoModelForCausalLM

    dtype = resolve_dtype(cfg.dtype)
    kwargs = dict(revision=cfg.revision, dtype=dtype, trust_remote_code=cfg.trust_remote_code)
    if cfg.attn_implementation:
        kwargs["attn_implementation"] = cfg.attn_implementation
    if quantized:
        kwargs["quantization_config"] = _quantization_config(dtype)
        kwargs["device_map"] = {"": _process_device()}
    try:
        return AutoModelForCausalLM.from_pretrained(cfg.name_or_path, **kwargs)
    except (OSError, ValueError) as e:  # an unresolvable hub id, no network, a directory without weights
        raise SetupError(f"model.name_or_path: cannot load a model from {cfg.name_or_path!r}: {e}") from None


def lora_config(opts: LoraOptions):
    from peft import LoraConfig

    targets = opts.target_modules
    # peft spells "every linear layer but the output head" as the string "all-linear".
    target = "all-linear" if list(targets) == ["all-linear"] else list(targets)
    return LoraConfig(r=opts.r, lora_alpha=opts.alpha, lora_dropout=opts.dropout, target_modules=target,
                      bias="none", task_type="CAUSAL_LM")


def build_model(cfg: TrainConfig):
    """The trainable model: base + LoRA adapters (lora, qlora) or the base itself (full)."""
    model = load_base_model(cfg.model, quantized=cfg.finetune == "qlora")
    model.config.use_cache = False  # the KV cache is useless in training and costs memory
    if cfg.finetune == "full":
        if cfg.model.gradient_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return model
    from peft import get_peft_model, prepare_model_for_kbit_training

    if cfg.finetune == "qlora":
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=cfg.model.gradient_checkpointing,
                                                gradient_checkpointing_kwargs={"use_reentrant": False})
    elif cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()  # frozen embeddings: give checkpointed blocks a grad path
    peft_model = get_peft_model(model, lora_config(cfg.lora))
    trainable, total = peft_model.get_nb_trainable_parameters()
    log.info("LoRA: %s trainable of %s parameters (%.3f%%)", f"{trainable:,}", f"{total:,}", 100 * trainable / total)
    return peft_model


def merge_adapter(cfg: TrainConfig, adapter_dir, out_dir) -> None:
    """Write base + adapter merged into plain weights (safetensors), from a fresh full-precision base.

    The base is reloaded unquantised, so a QLoRA adapter merges into real weights and
    the result loads in transformers and vLLM like the original model.
    """
    from peft import PeftModel

    base = load_base_model(cfg.model)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(str(out_dir), safe_serialization=True)
