"""Spans: which characters of a CUDA response are execution-critical, and which tokens.

`detect` finds CUDA-sensitive character spans with the tree-sitter CUDA grammar;
`align` and `token_kinds` map them onto the tokens of a chat-rendered sample through
the tokenizer's offset mapping. The CuSeT CUDA mask (paper eq. 3) is
``lambda * align(detect(response), offsets, response_start=..., kinds=CUSET_KINDS)``.
"""

from cuset.spans.align import align, token_kinds
from cuset.spans.detector import SPAN_MODES, detect
from cuset.spans.span import ALL_KINDS, CUSET_KINDS, FINE_KINDS, KIND_HELP, Span, span_sort_key

__all__ = [
    "Span", "detect", "align", "token_kinds", "SPAN_MODES",
    "CUSET_KINDS", "FINE_KINDS", "ALL_KINDS", "KIND_HELP", "span_sort_key",
]
