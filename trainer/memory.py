"""The memory a training step took, logged with its metrics: the accelerator's peak since the step began
(CUDA: what the caching allocator handed out, and what it held from the driver, the figure an out-of-memory
error is about) and the training process's resident memory on the host, in GiB. veRL logs the first two
under the same names."""

import psutil
import torch

from diagnostics.metrics import PERF_MAX_MEMORY_ALLOCATED_GB, PERF_MAX_MEMORY_RESERVED_GB, PERF_RSS_GB

GIB = 1024**3


def step_began(device: torch.device) -> None:
    """Start the accelerator's peaks afresh, so that each step's are its own."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def memory_metrics(device: torch.device) -> dict[str, float]:
    """The step's memory metrics; the accelerator's only on one that counts its memory (CUDA)."""
    metrics = {PERF_RSS_GB: psutil.Process().memory_info().rss / GIB}
    if device.type == "cuda":
        metrics[PERF_MAX_MEMORY_ALLOCATED_GB] = torch.cuda.max_memory_allocated(device) / GIB
        metrics[PERF_MAX_MEMORY_RESERVED_GB] = torch.cuda.max_memory_reserved(device) / GIB
    return metrics
