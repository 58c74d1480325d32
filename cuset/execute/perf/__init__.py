"""Kernel performance: Nsight Compute roofline arithmetic (CUDABench's definitions) and the
KernelBench-style timing loop. Pure modules; the GPU runners that use them live with the
evaluation (cuset.evaluate.perf)."""
