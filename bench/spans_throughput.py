"""Throughput of the span detector and token alignment (issue 3).

Builds N synthetic CUDA responses of about 2,500 characters (several kernels, host code,
launches; some wrapped in markdown with prose, some truncated mid-way, some with
non-ASCII comments), tokenises them once with a locally trained byte-level BPE chat
tokenizer (not timed: that is the trainer's cost), then times, on ONE core:
`detect(response)` and `align(spans, offsets, ...)` per sample, as the training data
builder calls them. Prints samples/s next to the target (>= 200 samples/s).

    .venv/bin/python bench/spans_throughput.py [--n 10000] [--chars 2500] [--seed 0]
"""

from __future__ import annotations

# What this script measures (the span detector and token alignment): a record in bench/results is stale once a commit
# after its own touches one of these paths (docs/tools/perf_table.py).
MEASURES = ("cuset/spans",)

import argparse
import os
import random
import statistics
import time

TARGET_SAMPLES_PER_S = 200.0

ELEMENTWISE = """
__global__ void {name}(const float *__restrict__ x, float *__restrict__ y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = {expr};
}}
"""

REDUCTION = """
template <int BLOCK>
__global__ void {name}(const float *in, float *out, int n) {{
    __shared__ float buf[BLOCK];
    int tid = threadIdx.x;
    float v = 0.0f;
    for (int i = blockIdx.x * BLOCK + tid; i < n; i += BLOCK * gridDim.x) v += in[i];
    buf[tid] = v;
    __syncthreads();
    for (int s = BLOCK / 2; s >= 32; s >>= 1) {{
        if (tid < s) buf[tid] += buf[tid + s];
        __syncthreads();
    }}
    if (tid < 32) {{
        v = buf[tid];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
        if (tid == 0) atomicAdd(out, v);
    }}
}}
"""

MATMUL = """
#define {tile_macro} {tile}
__global__ void {name}(const float *A, const float *B, float *C, int M, int N, int K) {{
    __shared__ float As[{tile_macro}][{tile_macro}], Bs[{tile_macro}][{tile_macro}];
    int row = blockIdx.y * {tile_macro} + threadIdx.y, col = blockIdx.x * {tile_macro} + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (K + {tile_macro} - 1) / {tile_macro}; ++t) {{
        As[threadIdx.y][threadIdx.x] = row < M && t * {tile_macro} + threadIdx.x < K ? A[row * K + t * {tile_macro} + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = col < N && t * {tile_macro} + threadIdx.y < K ? B[(t * {tile_macro} + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < {tile_macro}; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }}
    if (row < M && col < N) C[row * N + col] = acc;
}}
"""

HOST = """
int main() {{
    const int n = {size};
    size_t bytes = n * sizeof(float);
    float *h_x = (float *)malloc(bytes), *d_x, *d_y;
    for (int i = 0; i < n; ++i) h_x[i] = (float)(i % 17) / 17.0f;  // {comment}
    cudaMalloc(&d_x, bytes);
    cudaMalloc(&d_y, bytes);
    cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice);
    int threads = {threads};
    int blocks = (n + threads - 1) / threads;
{launches}
    cudaDeviceSynchronize();
    cudaMemcpy(h_x, d_y, bytes, cudaMemcpyDeviceToHost);
    printf("%f\\n", h_x[0]);
    cudaFree(d_x);
    cudaFree(d_y);
    free(h_x);
    return 0;
}}
"""

PROSE = [
    "Here is an implementation that uses shared memory and warp shuffles for the reduction.",
    "Each thread handles one element; the grid is sized so that every element is covered.",
    "The kernels below are launched from `main`, which also checks the result on the host.",
    "Note: the block size must be a power of two for the tree reduction to be correct.",
]
COMMENTS = ["fill the input", "valeurs d'entrée — déterministes", "入力データ", "inputs ✓"]
EXPRESSIONS = ["x[i] * 2.0f", "fmaxf(x[i], 0.0f)", "x[i] / (1.0f + __expf(-x[i]))", "tanhf(x[i]) + 1.0f"]


def synthetic_response(rng: random.Random, chars: int) -> str:
    kernels, launches = [], []
    while sum(map(len, kernels)) < chars - 1170:
        name = f"{rng.choice(['scale', 'relu', 'reduce', 'mm', 'act', 'norm'])}_{rng.randrange(1000)}"
        kind = rng.random()
        if kind < 0.5:
            kernels.append(ELEMENTWISE.format(name=name, expr=rng.choice(EXPRESSIONS)))
            launches.append(f"    {name}<<<blocks, threads>>>(d_x, d_y, n);")
        elif kind < 0.8:
            kernels.append(REDUCTION.format(name=name))
            launches.append(f"    {name}<256><<<(n + 255) / 256, 256>>>(d_x, d_y, n);")
        else:
            tile = rng.choice([8, 16, 32])
            kernels.append(MATMUL.format(name=name, tile_macro=f"TILE_{name.upper()}", tile=tile))
            launches.append(f"    dim3 block_{name}({tile}, {tile}), grid_{name}((n + {tile - 1}) / {tile}, (n + {tile - 1}) / {tile});\n"
                            f"    {name}<<<grid_{name}, block_{name}>>>(d_x, d_x, d_y, n, n, n);")
    host = HOST.format(size=rng.choice([1024, 1 << 16, 1 << 20]), threads=rng.choice([128, 256, 512]),
                       launches="\n".join(launches), comment=rng.choice(COMMENTS))
    code = "#include <cuda_runtime.h>\n#include <cstdio>\n" + "".join(kernels) + host
    if rng.random() < 0.4:
        code = f"{rng.choice(PROSE)}\n\n```cuda\n{code}```\n\n{rng.choice(PROSE)}\n"
    if rng.random() < 0.15:  # truncated generation
        code = code[: rng.randrange(len(code) // 2, len(code))]
    return code


def build_tokenizer(texts: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>")
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="number of responses")
    parser.add_argument("--chars", type=int, default=2_500, help="target response length in characters")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from _record import start_record

    record = start_record()  # before pinning to one core: the record names the machine's cores

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

    from tqdm import tqdm

    from cuset.spans import align, detect

    rng = random.Random(args.seed)
    responses = [synthetic_response(rng, args.chars) for _ in range(args.n)]
    tokenizer = build_tokenizer(responses[:200])
    prompt = [{"role": "user", "content": "Write a CUDA program that normalises a vector."}]
    prefix = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    samples = []
    for response in tqdm(responses, desc="tokenise (not timed)", leave=False, mininterval=1.0):
        full = tokenizer.apply_chat_template(prompt + [{"role": "assistant", "content": response}], tokenize=False)
        offsets = tokenizer(full, return_offsets_mapping=True)["offset_mapping"]
        samples.append((response, offsets))

    detect(responses[0])  # build the parser and compile the queries outside the timing
    detect_s = align_s = 0.0
    tokens = spans_found = 0
    per_sample = []
    cpu_start = time.process_time()
    wall_start = time.perf_counter()
    for response, offsets in tqdm(samples, desc="detect + align", leave=False, mininterval=1.0):
        t0 = time.perf_counter()
        spans = detect(response)
        t1 = time.perf_counter()
        mask = align(spans, offsets, response_start=len(prefix), response_end=len(prefix) + len(response))
        t2 = time.perf_counter()
        detect_s += t1 - t0
        align_s += t2 - t1
        per_sample.append(t2 - t0)
        tokens += len(mask)
        spans_found += len(spans)
    cpu_s = time.process_time() - cpu_start
    wall_s = time.perf_counter() - wall_start

    total = detect_s + align_s
    rate = len(samples) / total
    cpu_rate = len(samples) / cpu_s
    mean_chars = statistics.fmean(len(r) for r in responses)
    print(f"responses: {len(samples)}  mean length: {mean_chars:.0f} chars, {tokens / len(samples):.0f} tokens, "
          f"{spans_found / len(samples):.1f} spans  (one core)")
    print(f"{'step':<16}{'ms/sample':>12}{'samples/s':>12}")
    print(f"{'detect':<16}{1e3 * detect_s / len(samples):>12.3f}{len(samples) / detect_s:>12.0f}")
    print(f"{'align':<16}{1e3 * align_s / len(samples):>12.3f}{len(samples) / align_s:>12.0f}")
    print(f"{'detect + align':<16}{1e3 * total / len(samples):>12.3f}{rate:>12.0f}")
    p99 = sorted(per_sample)[int(0.99 * (len(per_sample) - 1))]
    print(f"p50 {1e3 * statistics.median(per_sample):.3f} ms, p99 {1e3 * p99:.3f} ms per sample")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"process CPU time: {cpu_s:.2f} s for {wall_s:.2f} s wall (load average {load:.1f}): "
          f"{cpu_rate:.0f} samples per CPU-second (what one uncontended core delivers)")
    print(f"target >= {TARGET_SAMPLES_PER_S:.0f} samples/s on one core:")
    verdicts = {}
    for label, value in (("wall clock", rate), ("CPU time", cpu_rate)):
        verdict = "PASS" if value >= TARGET_SAMPLES_PER_S else "FAIL"
        verdicts[label] = verdict
        print(f"  {label:<11}{value:>7.0f} samples/s = {value / TARGET_SAMPLES_PER_S:.2f}x the target -> {verdict}")
    record.write({
        "responses": len(samples), "mean_chars": round(mean_chars, 1), "mean_tokens": round(tokens / len(samples), 1),
        "mean_spans": round(spans_found / len(samples), 2), "cores_used": 1,
        "detect_ms_per_sample": 1e3 * detect_s / len(samples), "detect_samples_per_s": len(samples) / detect_s,
        "align_ms_per_sample": 1e3 * align_s / len(samples), "align_samples_per_s": len(samples) / align_s,
        "detect_align_ms_per_sample": 1e3 * total / len(samples), "samples_per_s": rate,
        "p50_ms": 1e3 * statistics.median(per_sample), "p99_ms": 1e3 * p99,
        "cpu_s": cpu_s, "wall_s": wall_s, "samples_per_cpu_s": cpu_rate, "load_1min_at_end": load,
        "target_samples_per_s": TARGET_SAMPLES_PER_S,
        "verdict_wall_clock": verdicts["wall clock"], "verdict_cpu_time": verdicts["CPU time"],
    })


if __name__ == "__main__":
    main()
