"""CUDA spans of a response: run the span detector on the code it holds.

A response is either one program at a known place (`code_range`, CUDABench
references) or free text whose code the detector finds itself, with the same reader
of fenced blocks that code extraction uses (`cuset.spans.text.code_segments` over
`cuset.tasks.reply.fenced_blocks`): what the CUDA mask covers is what the span viewer
shows and what evaluation would compile. Span offsets come back relative to the
response text, which is what `tokenize_example` takes.
"""

from __future__ import annotations

import dataclasses


def response_spans(response: str, code_range: tuple[int, int] | None = None, mode: str = "broad") -> list:
    """CUDA spans (cuset.spans.Span) of `response`, offsets relative to `response`
    (`mode`: the detector's broad or paper span set, see cuset.spans.detector)."""
    from cuset.spans import detect  # lazy: loads tree-sitter

    if code_range is None:
        return detect(response, mode=mode)
    start, end = code_range
    return [dataclasses.replace(span, start=span.start + start, end=span.end + start)
            for span in detect(response[start:end], mode=mode)]
