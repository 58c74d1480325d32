"""Features a CUDA program may use that the CPU backend cannot run.

Found before compiling, so that such programs are reported as `unsupported`
(naming the feature and its line) rather than failing in a way that looks
like the program's fault. Grid-wide synchronisation is found at run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuset.execute.cpu.lexer import COMMENT, IDENT, PUNCT, SPACE, STRING, Token
from cuset.execute.cpu.scopes import Decl


@dataclass(frozen=True)
class Unsupported:
    feature: str
    line: int
    symbol: str = ""  # what the program uses: `cub::DeviceReduce::Sum`, `cublasSgemm`, a PTX instruction

    def describe(self) -> str:
        used = f": {self.symbol}" if self.symbol else ""
        return f"{self.feature}{used} (line {self.line})"


@dataclass(frozen=True)
class LibraryInclude:
    """`#include` of a library the CPU backend does not provide; dropped when nothing of it is used."""

    header: str
    feature: str
    line: int
    start: int  # source offsets of the whole directive line (without its newline)
    end: int


# Header (path prefix, case-insensitive) -> feature name. Including one is not a use: the
# include is dropped (a comment keeps the line) and only a used name makes a program unsupported.
UNSUPPORTED_HEADERS: tuple[tuple[str, str], ...] = (
    ("cublas", "cuBLAS"),
    ("cublaslt", "cuBLASLt"),
    ("cudnn", "cuDNN"),
    ("cufft", "cuFFT"),
    ("curand", "cuRAND"),
    ("cusparse", "cuSPARSE"),
    ("cusolver", "cuSOLVER"),
    ("cutensor", "cuTENSOR"),
    ("thrust/", "Thrust"),
    ("cub/", "CUB"),
    ("cuda/", "libcu++ (cuda/...)"),
    ("cutlass/", "CUTLASS"),
    ("cute/", "CUTLASS CuTe"),
    ("mma.h", "tensor-core WMMA (mma.h)"),
    ("nvrtc", "runtime compilation (NVRTC)"),
    ("npp", "NPP"),
    ("nccl", "NCCL"),
    ("nvshmem", "NVSHMEM"),
    ("cuda_pipeline", "asynchronous copy pipelines (cuda_pipeline.h)"),
    ("cuda_awbarrier", "asynchronous barriers (cuda_awbarrier.h)"),
    ("cuda_fp8", "FP8 types (cuda_fp8.h)"),
    ("cuda_fp6", "FP6 types (cuda_fp6.h)"),
    ("cuda_fp4", "FP4 types (cuda_fp4.h)"),
    ("cudagl", "OpenGL interoperability"),
    ("cuda_gl_interop", "OpenGL interoperability"),
    ("cudaegl", "EGL interoperability"),
    ("cuda_egl_interop", "EGL interoperability"),
    ("cupti", "CUPTI"),
)

# Identifier (exact, prefix* or namespace::) -> feature name.
UNSUPPORTED_NAMES: tuple[tuple[str, str], ...] = (
    ("wmma::", "tensor-core WMMA"),
    ("mma_sync", "tensor-core WMMA"),
    ("load_matrix_sync", "tensor-core WMMA"),
    ("__hmma*", "tensor-core MMA intrinsics"),
    ("__imma*", "tensor-core MMA intrinsics"),
    ("__bmma*", "tensor-core MMA intrinsics"),
    ("__dmma*", "tensor-core MMA intrinsics"),
    ("cublas*", "cuBLAS"),
    ("cudnn*", "cuDNN"),
    ("cufft*", "cuFFT"),
    ("curand*", "cuRAND"),
    ("cusparse*", "cuSPARSE"),
    ("cusolver*", "cuSOLVER"),
    ("thrust::", "Thrust"),
    ("cub::", "CUB"),
    ("CUB_*", "CUB"),
    ("THRUST_*", "Thrust"),
    ("cuda::", "libcu++ (cuda::)"),
    ("cutlass::", "CUTLASS"),
    ("cute::", "CUTLASS CuTe"),
    ("nvcuda::", "tensor-core WMMA"),
    ("nppi*", "NPP"),
    ("npps*", "NPP"),
    ("nppGet*", "NPP"),
    ("nccl*", "NCCL"),
    ("nvshmem*", "NVSHMEM"),
    ("nvshmemx*", "NVSHMEM"),
    ("__awbarrier*", "asynchronous barriers"),
    ("__nv_fp8*", "FP8 types"),
    ("__nv_fp6*", "FP6 types"),
    ("__nv_fp4*", "FP4 types"),
    ("cudaGraphicsGL*", "OpenGL interoperability"),
    ("cudaGL*", "OpenGL interoperability"),
    ("cudaEGL*", "EGL interoperability"),
    ("cudaGraphicsEGL*", "EGL interoperability"),
    ("cupti*", "CUPTI"),
    ("cufft*", "cuFFT"),
    ("cusparse*", "cuSPARSE"),
    ("cutensor*", "cuTENSOR"),
    ("cublasLt*", "cuBLASLt"),
    ("nvrtc*", "runtime compilation (NVRTC)"),
    ("cudaGraph*", "CUDA graphs"),
    ("cudaStreamBeginCapture", "CUDA graphs (stream capture)"),
    ("cudaStreamEndCapture", "CUDA graphs (stream capture)"),
    ("cuInit", "CUDA driver API"),
    ("cuModule*", "CUDA driver API"),
    ("cuLaunchKernel", "CUDA driver API"),
    ("cuCtx*", "CUDA driver API"),
    ("cuDevice*", "CUDA driver API"),
    ("cuMem*", "CUDA driver API"),
    ("cuLink*", "CUDA driver API"),
    ("cuFunc*", "CUDA driver API"),
    ("cudaIpc*", "CUDA IPC"),
    ("cudaLaunchKernelEx", "extensible launches (cudaLaunchKernelEx)"),
    ("cudaLaunchKernelExC", "extensible launches (cudaLaunchKernelEx)"),
    ("__cluster_dims__", "thread block clusters"),
    ("this_cluster", "thread block clusters"),
    ("cluster_group", "thread block clusters"),
    ("__pipeline_memcpy_async", "asynchronous copy pipelines"),
    ("__pipeline_commit", "asynchronous copy pipelines"),
    ("__pipeline_wait_prior", "asynchronous copy pipelines"),
    ("this_multi_grid", "multi-device cooperative launches"),
    ("cudaLaunchCooperativeKernelMultiDevice", "multi-device cooperative launches"),
    ("tex1DGrad", "texture gradients/mipmaps"),
    ("tex2DGrad", "texture gradients/mipmaps"),
    ("tex2DLod", "texture gradients/mipmaps"),
    ("tex3DLod", "texture gradients/mipmaps"),
    ("texCubemap", "cubemap textures"),
    ("tex2Dgather", "texture gather"),
)

_PTX_HINT = re.compile(r"%(laneid|warpid|smid|tid|ctaid|clock|globaltimer|lanemask)|\b[a-z]+(\.[a-z0-9]+)+\s")
ASM_WORDS = frozenset({"asm", "__asm__", "__asm"})


def find_unsupported(tokens: list[Token], decls: list[Decl]) -> list[Unsupported]:
    """Every unsupported feature, first occurrence of each, in source order."""
    found: dict[str, Unsupported] = {}

    def add(feature: str, line: int, symbol: str = "") -> None:
        found.setdefault(feature, Unsupported(feature, line, symbol))

    device_bodies = [d for d in decls if d.device and d.body is not None]
    device_all = [d for d in decls if d.device]
    n = len(tokens)
    for k, t in enumerate(tokens):
        if t.kind in (SPACE, COMMENT):
            continue
        if t.directive:  # includes are not uses (see library_includes); macros are looked at where expanded
            continue
        if t.kind != IDENT:
            continue
        if t.text in ASM_WORDS and _next_text(tokens, k) in ("(", "volatile", "__volatile__", "goto"):
            template = asm_template(tokens, k)
            if not template.strip():
                continue  # `asm volatile("" ::: "memory")`: a compiler barrier, no instruction (rewriter.py)
            in_device = any(d.contains(k) for d in device_all)
            if in_device or _PTX_HINT.search(template):
                add("inline PTX assembly (asm)", t.line, _first_instruction(template))
            continue
        feature = _name_feature(t.text, _next_text(tokens, k))
        if feature and not _is_member_access(tokens, k):
            add(feature, t.line, _qualified_name(tokens, k))
            continue
        if t.text == "cudaDeviceSynchronize" and _next_text(tokens, k) == "(" \
                and any(d.in_body(k) for d in device_bodies):
            add("dynamic parallelism (cudaDeviceSynchronize in device code)", t.line)
    # Launches inside device functions.
    for k in range(n - 2):
        t = tokens[k]
        if t.kind == PUNCT and t.text == "<" and tokens[k + 1].text == "<" and tokens[k + 2].text == "<" \
                and t.end == tokens[k + 1].start and tokens[k + 1].end == tokens[k + 2].start:
            if any(d.in_body(k) for d in device_bodies):
                add("dynamic parallelism (kernel launch from device code)", t.line)
    for u in find_embedded_files(tokens):
        add(u.feature, u.line)
    return sorted(found.values(), key=lambda u: u.line)


def find_embedded_files(tokens: list[Token]) -> list[Unsupported]:
    """What would put a file's bytes into the build: assembler directives in string literals
    (`.incbin`, `.include`, sections) and the preprocessor's `#embed` (C23, C++26)."""
    found = find_assembler_directives(tokens)
    prev = None
    for t in tokens:
        if t.kind in (SPACE, COMMENT):
            continue
        if t.directive and t.kind == IDENT and t.text == "embed" and prev is not None and prev.text == "#":
            found.append(Unsupported("preprocessor directive #embed (reads a file at compile time)", t.line))
        prev = t
    return sorted(found, key=lambda u: u.line)


# Assembler directives that read files (`.incbin`, `.include`: a reference output
# embedded at compile time) or place data in sections of their own. No CUDA program
# needs them; they are looked for in every string literal, so a directive split over
# adjacent literals or hidden in a macro's string is found as well.
_ASM_DIRECTIVE_RE = re.compile(r"(?:^|[\s;:])\.(incbin|include|section|pushsection)\b")


def find_assembler_directives(tokens: list[Token]) -> list[Unsupported]:
    """String literals (adjacent ones joined) holding a file-reading or section directive."""
    found: list[Unsupported] = []
    run: list[Token] = []
    for t in [*tokens, None]:
        if t is not None and t.kind in (SPACE, COMMENT) and run:
            continue
        if t is not None and t.kind == STRING:
            run.append(t)
            continue
        if run:
            text = "".join(_literal_body(r.text) for r in run)
            m = _ASM_DIRECTIVE_RE.search(text)
            if m:
                found.append(Unsupported(f"assembler directive .{m.group(1)} (reads files or defines sections "
                                         "at compile time)", run[0].line))
            run = []
    return found


def _literal_body(text: str) -> str:
    """The characters between the quotes of a string literal (prefixes like u8/L/R dropped)."""
    start, end = text.find('"'), text.rfind('"')
    return text[start + 1:end] if 0 <= start < end else text


def _include_target(tokens: list[Token], k: int) -> str | None:
    j = k + 1
    while j < len(tokens) and tokens[j].kind == SPACE and tokens[j].directive:
        j += 1
    if j >= len(tokens) or not tokens[j].directive:
        return None
    if tokens[j].kind == STRING:
        return tokens[j].text.strip('"')
    if tokens[j].text == "<":
        parts = []
        j += 1
        while j < len(tokens) and tokens[j].directive and tokens[j].text != ">":
            parts.append(tokens[j].text)
            j += 1
        return "".join(parts)
    return None


def _header_feature(header: str) -> str | None:
    h = header.lower().lstrip("./")
    for prefix, feature in UNSUPPORTED_HEADERS:
        if h.startswith(prefix):
            return feature
    return None


def _name_feature(name: str, following: str) -> str | None:
    for pattern, feature in UNSUPPORTED_NAMES:
        if pattern.endswith("::"):
            if name == pattern[:-2] and following == "::":
                return feature
        elif pattern.endswith("*"):
            if name.startswith(pattern[:-1]):
                return feature
        elif name == pattern:
            return feature
    return None


def _next_text(tokens: list[Token], k: int) -> str:
    j = k + 1
    while j < len(tokens) and tokens[j].kind in (SPACE, COMMENT):
        j += 1
    return tokens[j].text if j < len(tokens) else ""


def _is_member_access(tokens: list[Token], k: int) -> bool:
    """`x.wmma` or `s->cub`: a field that happens to share a library's name."""
    j = k - 1
    while j >= 0 and tokens[j].kind in (SPACE, COMMENT):
        j -= 1
    return j >= 0 and tokens[j].text in (".", "->")


def asm_template(tokens: list[Token], k: int) -> str:
    """The instruction template of the asm statement starting at token k: its string literals
    before the first `:` (operands and clobbers follow it)."""
    parts, depth = [], 0
    for t in tokens[k + 1:]:
        if t.text == "(":
            depth += 1
        elif t.text == ")":
            depth -= 1
            if depth <= 0:
                break
        elif t.text == ":" and depth == 1:
            break
        elif t.kind == STRING:
            parts.append(_literal_body(t.text))
    return "".join(parts)


def _first_instruction(template: str) -> str:
    first = next((part.strip() for part in re.split(r"[;\n]|\\n", template) if part.strip()), template.strip())
    return f'"{first[:60]}"'


def _qualified_name(tokens: list[Token], k: int) -> str:
    """`cub::DeviceReduce::Sum` from the tokens starting at k (template arguments skipped)."""
    parts = [tokens[k].text]
    j = k + 1
    while True:
        a = _skip_space(tokens, j)
        if a >= len(tokens) or tokens[a].text != "::":
            break
        b = _skip_space(tokens, a + 1)
        if b >= len(tokens) or tokens[b].kind != IDENT:
            break
        parts.append(tokens[b].text)
        j = b + 1
    return "::".join(parts)


def _skip_space(tokens: list[Token], j: int) -> int:
    while j < len(tokens) and tokens[j].kind in (SPACE, COMMENT):
        j += 1
    return j


def library_includes(tokens: list[Token]) -> list[LibraryInclude]:
    """Every `#include` of a library header the CPU backend does not provide."""
    found = []
    for k, t in enumerate(tokens):
        if not (t.directive and t.kind == IDENT and t.text == "include"):
            continue
        header = _include_target(tokens, k)
        feature = _header_feature(header) if header else None
        if feature is None:
            continue
        start = k
        while start > 0 and tokens[start].text != "#":  # back to the directive's `#`
            start -= 1
        end = k
        while end + 1 < len(tokens) and tokens[end + 1].directive and "\n" not in tokens[end + 1].text:
            end += 1
        found.append(LibraryInclude(header, feature, t.line, tokens[start].start, tokens[end].end))
    return found
