"""Training data: records -> chat-rendered tokens with labels and the CUDA mask."""

from cuset.train.data.build import DataError, DataReport, build_dataset, cache_key, tokenize_files, tokenizer_fingerprint
from cuset.train.data.collate import PadCollator
from cuset.train.data.config import DataConfig
from cuset.train.data.cuda_spans import code_ranges, response_spans
from cuset.train.data.records import FORMATS, Example, RecordOptions, parse_record, read_examples, wrap_response
from cuset.train.data.tokenize import IGNORE_INDEX, PromptTooLongError, RenderedTurn, TemplateError, render_conversation, tokenize_example

__all__ = [
    "DataError", "DataReport", "build_dataset", "cache_key", "tokenize_files", "tokenizer_fingerprint",
    "PadCollator", "DataConfig", "code_ranges", "response_spans",
    "FORMATS", "Example", "RecordOptions", "parse_record", "read_examples", "wrap_response",
    "IGNORE_INDEX", "PromptTooLongError", "RenderedTurn", "TemplateError", "render_conversation", "tokenize_example",
]
