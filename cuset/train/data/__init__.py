"""Training data: records -> chat-rendered tokens with labels and the CUDA mask.

Names are loaded from their submodules on first use, so `from cuset.train.data import
DataConfig` (configs, the CLI's checks) does not import torch."""

import importlib

# name -> submodule
_EXPORTS = {
    **dict.fromkeys(("DataError", "DataReport", "build_dataset", "cache_key", "tokenize_files", "tokenizer_fingerprint"), "build"),
    "PadCollator": "collate",
    "DataConfig": "config",
    "response_spans": "cuda_spans",
    **dict.fromkeys(("FORMATS", "Example", "RecordOptions", "parse_record", "read_examples", "wrap_response"), "records"),
    **dict.fromkeys(("IGNORE_INDEX", "PromptTooLongError", "RenderedTurn", "TemplateError", "render_conversation",
                     "tokenize_example"), "tokenize"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"cuset.train.data.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'cuset.train.data' has no attribute {name!r}")
