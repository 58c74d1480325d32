"""CUDA spans of a response: run the span detector on the code it holds.

A response is either one program at a known place (`code_range`, CUDABench
references) or free text whose fenced code blocks hold the programs. Span offsets
come back relative to the response text, which is what `tokenize_example` takes.
"""

from __future__ import annotations

import dataclasses
import re

# An opening fence with any info string, its body, then a closing fence or the end
# of the text (a truncated answer still has code worth masking).
FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:\n```|\Z)", re.DOTALL)


def code_ranges(response: str) -> list[tuple[int, int]]:
    """(start, end) of each fenced block body; the whole text when there is none."""
    ranges = [m.span(1) for m in FENCE.finditer(response) if m.end(1) > m.start(1)]
    return ranges or [(0, len(response))]


def response_spans(response: str, code_range: tuple[int, int] | None = None, mode: str = "broad") -> list:
    """CUDA spans (cuset.spans.Span) of `response`, offsets relative to `response`
    (`mode`: the detector's broad or paper span set, see cuset.spans.detector)."""
    from cuset.spans import detect  # lazy: loads tree-sitter

    spans = []
    for start, end in ([code_range] if code_range is not None else code_ranges(response)):
        for span in detect(response[start:end], mode=mode):
            spans.append(dataclasses.replace(span, start=span.start + start, end=span.end + start))
    return spans
