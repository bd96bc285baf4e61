"""Device choice and a one-line description of the hardware, recorded in every checkpoint."""

from __future__ import annotations

import os
import platform

import torch

from capsviz.errors import CapsvizError

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def pick_device(name: str = "auto") -> torch.device:
    """auto: CUDA, then Apple MPS, then CPU. An explicit device that is absent is an error."""
    has_mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "mps" if has_mps else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise CapsvizError("--device cuda: no CUDA GPU is visible to PyTorch (use --device auto or cpu)")
    if name == "mps" and not has_mps:
        raise CapsvizError("--device mps: Apple MPS is not available here (use --device auto or cpu)")
    if name.startswith("cuda:"):
        index = name.removeprefix("cuda:")
        if not index.isdigit():
            raise CapsvizError(f"--device {name}: a GPU is named cuda:N with N a number, e.g. cuda:0")
        if not torch.cuda.is_available():
            raise CapsvizError(f"--device {name}: no CUDA GPU is visible to PyTorch (use --device auto or cpu)")
        if int(index) >= torch.cuda.device_count():
            raise CapsvizError(
                f"--device {name}: PyTorch sees {torch.cuda.device_count()} GPU(s), cuda:0 to cuda:{torch.cuda.device_count() - 1}"
            )
    elif name not in ("cpu", "cuda", "mps"):
        raise CapsvizError(f"unknown device {name!r}; choose auto, cpu, cuda, cuda:N or mps")
    return torch.device(name)


def autocast(device: torch.device, precision: str):
    if precision not in PRECISIONS:
        raise CapsvizError(f"unknown precision {precision!r}; choose {', '.join(PRECISIONS)}")
    dtype = PRECISIONS[precision]
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def describe_hardware(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores ({device.type})"
