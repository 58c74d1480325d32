"""Render the generation prompt of a CUDABench task at a prompt level.

Two styles:
- `compat=True` reproduces the official CUDABench harness text (system prompt with
  its float-only boilerplate, user prompt ending in "CUDA program:"), so numbers
  are comparable with published ones.
- the default is a clean prompt: same sections, but the system prompt states the
  real I/O contract (raw little-endian files of the declared dtype) instead of
  forcing everything through float helpers.

`cuset.tasks.render_prompt` picks the renderer by the task's kind (cuset.tasks.kinds);
KernelBench's is cuset.tasks.kernelbench_prompts, with the same two styles.
"""

from __future__ import annotations

from cuset.tasks.schema import RenderedPrompt, Task, TensorSpec

DEFAULT_GPU = "NVIDIA GeForce RTX 4090"  # the official harness's default GPU label

# Text of the official harness (CUDABench Generate/prompt.py), kept verbatim
# because compat mode exists to reproduce it. The harness sends this string
# *unformatted*: the doubled braces and the literal "{gpu}" reach the model.
COMPAT_SYSTEM = """You are an expert CUDA High-Performance Computing (HPC) engineer.
Your goal is to write a standalone, compilable, and highly efficient CUDA program based on the user's task description.

### CRITICAL INSTRUCTIONS

1. **Output Format**: 
   - You must output **ONLY** a single code block (starting with ```cpp and ending with ```). 
   - Do NOT include any introductory text, explanations, or concluding remarks. 
   - The content inside the block must be the complete C++ source code.

2. **Mandatory Helper Functions & Headers**: 
   - You MUST start your code with the exact boilerplate provided below. 
   - **Do NOT add any other headers** (like <algorithm> or <cmath>) outside this block; they are already included.
   - Do NOT modify the `read_binary` or `write_binary` functions.

// --- BEGIN REQUIRED BOILERPLATE ---
#include <iostream>
#include <fstream>
#include <string>
#include <vector>
#include <cmath>
#include <algorithm>
#include <cfloat>
#include <cuda_runtime.h>

void read_binary(const std::string& filename, float* data, size_t size) {{
    std::ifstream in(filename, std::ios::binary);
    if (!in) {{
        std::cerr << "Can not open: " << filename << std::endl;
        exit(1);
    }}
    in.read(reinterpret_cast<char*>(data), size * sizeof(float));
    in.close();
}}

void write_binary(const std::string& filename, const float* data, size_t size) {{
    std::ofstream out(filename, std::ios::binary);
    if (!out) {{
        std::cerr << "Can not write: " << filename << std::endl;
        exit(1);
    }}
    out.write(reinterpret_cast<const char*>(data), size * sizeof(float));
    out.close();
}}
// --- END REQUIRED BOILERPLATE ---

3. **Implementation Rules**:
   - **Single Kernel Entry**: Implement the main logic in a single `__global__` function. You may define `__device__` helper functions if needed.
   - **Precision**: Use `float` (float32) for all data. 
   - **Math Functions**: Do NOT use `std::max`, `std::min`, or `std::abs` in device code. ALWAYS use intrinsics: `fmaxf`, `fminf`, `fabsf`, `sqrtf`, `expf`, etc.
   - **Safety**: Always perform boundary checks.

4. **Strict Data & Parameter Binding** (CRITICAL):
   - **Variable Names**: You MUST match the variable names in the `main` function to the names provided in the Input/Output section (e.g., Input `matA` -> Host pointer `h_matA` / Device pointer `d_matA`).
   - **Filenames**: You MUST assume all input and output files are located in the `data/` directory. Construct the file path by prepending `data/` and appending `.bin` to the variable name (e.g., Input `matA` -> read from `"data/matA.bin"`), unless a full path is explicitly provided.
   - **Shapes & Sizes**: 
     - Respect the explicit shape given (e.g., `(1024, 4096)`). 
     - Calculate total elements as the product of dimensions.
     - Hardcode these dimensions as `const int` or `#define` if they are fixed numbers in the prompt. Do NOT use arbitrary default sizes.
   - **Data Types**: Even if the input says `int` or `double`, you must treat them as `float` to comply with the mandatory boilerplate, or cast them appropriately if logic requires.

5. **Main Function Logic**:
   - Define file paths based on the Rule #4.
   - Allocate Host memory (`new float[...]`) and Device memory (`cudaMalloc`) using the EXACT sizes from the task description.
   - Read input using `read_binary`.
   - Copy Host -> Device (`cudaMemcpy`).
   - **Launch Configuration**: Calculate grid and block dimensions dynamically based on input size. Optimize for the {gpu}.
   - Launch the kernel.
   - Copy Device -> Host.
   - Write output using `write_binary`.
   - Free all memory (`cudaFree`, `delete[]`).
"""

COMPAT_USER = """
### TASK SPECIFICATION

Task Name:
{task_name}

Task Description:
{task_description}

Input:
{input_spec}

Output:
{output_spec}

GPU:
{gpu}

CUDA program:
"""

CLEAN_SYSTEM = """You are an expert CUDA engineer. Write one complete, compilable CUDA C++ program for the task.

Contract:
- Reply with a single ```cuda fenced code block holding the whole program, including `int main()`.
- Each input `x` is a raw little-endian binary file `data/x.bin` of the declared dtype and shape (no header); write each output `y` to `data/y.bin` the same way.
- Sizes are fixed by the declared shapes: hard-code them.
- Do the computation in one or more `__global__` kernels, check CUDA errors, and return 0 on success.
- Use only the CUDA runtime and the C++ standard library (no cuBLAS, Thrust or CUB)."""

CLEAN_USER = """## Task Name
{task_name}

## Task Description
{task_description}

## Input
{input_spec}

## Output
{output_spec}

## GPU
{gpu}"""


def _spec_lines(specs: tuple[TensorSpec, ...]) -> str:
    # Same line format in both styles: "name: dtype, shape = (...)".
    return "\n".join(f"{s.name}: {s.dtype}, shape = {s.shape}" for s in specs)


def render_cudabench_prompt(task: Task, level: int = 1, *, compat: bool = False,
                            gpu: str | None = None) -> RenderedPrompt:
    """The system + user prompt asking a model to solve `task` at prompt `level` (1, 2 or 3).

    `gpu` is the GPU label. Both styles default to DEFAULT_GPU, the label the
    official harness passes; a record's own `gpu` is used when it is not "unknown".
    """
    description = task.prompt(level)
    if compat:
        label = gpu or (task.gpu if task.gpu and task.gpu != "unknown" else DEFAULT_GPU)
        user = COMPAT_USER.format(
            task_name=task.task_name, task_description=description,
            input_spec=_spec_lines(task.inputs), output_spec=_spec_lines(task.outputs), gpu=label,
        )
        return RenderedPrompt(system=COMPAT_SYSTEM, user=user)
    label = gpu or (task.gpu if task.gpu and task.gpu != "unknown" else DEFAULT_GPU)
    user = CLEAN_USER.format(
        task_name=task.task_name, task_description=description,
        input_spec=_spec_lines(task.inputs), output_spec=_spec_lines(task.outputs), gpu=label,
    )
    return RenderedPrompt(system=CLEAN_SYSTEM, user=user)
