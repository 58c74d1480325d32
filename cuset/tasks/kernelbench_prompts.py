"""Generation prompts of KernelBench tasks (`cuset.tasks.render_prompt` dispatches here by kind).

Two styles, as for CUDABench:
- `compat=True` reproduces the prompt of KernelBench's original generation script: the
  one-shot template (problem statement, an element-wise addition example given as a `Model`
  and its `ModelNew`, the task's architecture, the instruction) sent as the user message
  under the system message "You are a helpful assistant". The wording and whitespace of
  the template are KernelBench's, kept exactly because compat mode exists to reproduce
  them; the example pair is our own code of the same operation (a + b with one kernel),
  so the text around it matches while the example's lines do not.
- the default prompt states the contract plainly: the reference source, the ModelNew
  interface, load_inline with real `__global__` kernels, one ```python block, and the
  tolerances the answer is checked with.
KernelBench tasks have a single prompt: the prompt level does not apply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cuset.tasks.schema import RenderedPrompt

if TYPE_CHECKING:  # only for annotations
    from cuset.tasks.kernelbench import KernelBenchTask

COMPAT_SYSTEM = "You are a helpful assistant"

# KernelBench's template pieces. "\n" inside its triple-quoted strings were real newlines
# next to source line breaks, and the f-strings kept their source indentation (12 and 8
# spaces), so both show up in the text the model receives.
_I12, _I8 = " " * 12, " " * 8
COMPAT_STATEMENT = (
    "You write custom CUDA kernels to replace the pytorch operators in the given architecture to get speedups. \n"
    "\n"
    "    You have complete freedom to choose the set of operators you want to replace. You may make the decision "
    "to replace some operators with custom CUDA kernels and leave others unchanged. You may replace multiple "
    "operators with custom implementations, consider operator fusion opportunities (combining multiple operators "
    "into a single kernel, for example, combining matmul+relu), or algorithmic changes (such as online softmax). "
    "You are only limited by your imagination.\n"
    "\n"
)
COMPAT_EXAMPLE = (
    "\n"
    f"{_I12}Here's an example to show you the syntax of inline embedding custom CUDA operators in torch: "
    "The example given architecture is: \n\n"
    f"{_I12}``` \n\n"
    f"{_I12}{{example_arch}}\n"
    f"{_I12}``` \n\n"
    f"{_I12}The example new arch with custom CUDA kernels looks like this: \n"
    f"{_I12}```\n"
    f"{_I12}{{example_new_arch}}\n"
    f"{_I12}``` \n\n"
    f"{_I12}"
)
COMPAT_TASK = (
    "\n"
    f"{_I8}You are given the following architecture: \n\n"
    f"{_I8}```\n"
    f"{_I8}{{arch}}\n"
    f"{_I8}```\n"
    f"{_I8}"
)
COMPAT_INSTRUCTION = (
    "\n"
    "Optimize the architecture named Model with custom CUDA operators! Name your optimized output architecture "
    "ModelNew. Output the new code in codeblocks. Please generate real code, NOT pseudocode, make sure the code "
    "compiles and is fully functional. Just output the new model code, no other text, and NO testing code! \n"
    "\n"
)

# Our one-shot example (an element-wise a + b), in the shape KernelBench's example has.
EXAMPLE_ARCH = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    a = torch.randn(1, 128).cuda()
    b = torch.randn(1, 128).cuda()
    return [a, b]


def get_init_inputs():
    return []
'''

EXAMPLE_NEW_ARCH = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

add_cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    add_kernel<<<blocks, threads>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

add_cpp_source = "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"

# Compile the kernel when the module is imported
add_ext = load_inline(
    name="add_ext",
    cpp_sources=add_cpp_source,
    cuda_sources=add_cuda_source,
    functions=["add_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.add_ext = add_ext

    def forward(self, a, b):
        return self.add_ext.add_cuda(a, b)
'''

CLEAN_SYSTEM = """You are an expert CUDA engineer. You rewrite a PyTorch module so that its forward runs your own CUDA kernels.

Contract:
- Reply with a single ```python fenced code block holding one complete Python module.
- The module defines `class ModelNew(nn.Module)` with the same constructor arguments and the same forward signature as the reference `Model`, returning outputs of the same shapes and dtypes.
- The computation of forward runs in `__global__` kernels you write, compiled at import with `torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., cuda_sources=..., functions=[...])`: the CUDA source holds the kernels and C++ functions taking and returning `torch::Tensor`; `cpp_sources` declares those functions.
- Do not call the PyTorch operators you are replacing (or cuBLAS, cuDNN, Triton) in forward; allocating outputs and reshaping is fine.
- forward receives the tensors `get_inputs()` returns, moved to the GPU; do not redefine `Model`, `get_inputs` or `get_init_inputs`, and add no test code."""

CLEAN_USER = """## Task Name
{task_name}
{description}
## Reference (PyTorch)
```python
{reference}
```

## Correctness
ModelNew is built with the arguments of `get_init_inputs()` and called on `get_inputs()`; its outputs must match Model's within atol = {atol:g} and rtol = {rtol:g} over {n_trials} random inputs.{extra}"""

BACKWARD_NOTE = ("\nThe reference is differentiable: gradients with respect to the inputs may also be compared, so keep "
                 "ModelNew differentiable (for instance a torch.autograd.Function whose backward also runs your kernels).")


def compat_user_prompt(reference_src: str) -> str:
    """KernelBench's one-shot generation prompt for a reference architecture."""
    return (COMPAT_STATEMENT
            + COMPAT_EXAMPLE.format(example_arch=EXAMPLE_ARCH, example_new_arch=EXAMPLE_NEW_ARCH)
            + COMPAT_TASK.format(arch=reference_src)
            + COMPAT_INSTRUCTION)


def render_kernelbench_prompt(task: "KernelBenchTask", level: int = 1, *, compat: bool = False,
                              gpu: str | None = None) -> RenderedPrompt:
    """System + user prompt asking for a ModelNew of `task`. `gpu` (a label) is named in the
    default prompt only; `level` does not apply (one prompt per task), taken as every kind's renderer takes it."""
    if compat:
        return RenderedPrompt(system=COMPAT_SYSTEM, user=compat_user_prompt(task.reference_src))
    extra = BACKWARD_NOTE if task.backward else ""
    if gpu:
        extra += f"\n\n## GPU\n{gpu}"
    description = f"\n## Description\n{task.description}\n" if task.description.strip() else ""
    user = CLEAN_USER.format(task_name=task.task_name, description=description,
                             reference=task.reference_src.rstrip("\n"),
                             atol=task.atol, rtol=task.rtol, n_trials=task.n_trials, extra=extra)
    return RenderedPrompt(system=CLEAN_SYSTEM, user=user)
