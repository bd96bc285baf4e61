"""Device choice and a one-line description of the hardware, recorded in every checkpoint."""

from __future__ import annotations

import os
import platform

import torch

from capsviz.errors import CapsvizError
from capsviz.i18n import t, tn

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def pick_device(name: str = "auto") -> torch.device:
    """auto: CUDA, then Apple MPS, then CPU. An explicit device that is absent is an error."""
    has_mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "mps" if has_mps else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise CapsvizError(t("--device {name}: no CUDA GPU is visible to PyTorch (use --device auto or cpu)", name=name))
    if name == "mps" and not has_mps:
        raise CapsvizError(t("--device mps: Apple MPS is not available here (use --device auto or cpu)"))
    if name.startswith("cuda:"):
        index = name.removeprefix("cuda:")
        if not index.isdigit():
            raise CapsvizError(t("--device {name}: a GPU is named cuda:N with N a number, e.g. cuda:0", name=name))
        if not torch.cuda.is_available():
            raise CapsvizError(t("--device {name}: no CUDA GPU is visible to PyTorch (use --device auto or cpu)", name=name))
        count = torch.cuda.device_count()
        if int(index) >= count:
            raise CapsvizError(
                tn(
                    "--device {name}: PyTorch sees {n} GPU, cuda:0",
                    "--device {name}: PyTorch sees {n} GPUs, cuda:0 to cuda:{last}",
                    count,
                    name=name,
                    last=count - 1,
                )
            )
    elif name not in ("cpu", "cuda", "mps"):
        raise CapsvizError(t("unknown device {name}; choose auto, cpu, cuda, cuda:N or mps", name=repr(name)))
    return torch.device(name)


def serving_threads() -> int:
    """Set torch's threads for an app process that serves a class, once, and return them.

    One thread: a served process runs many sessions' small computations (one image, a few
    routing iterations), and a second thread per operation buys little time for much CPU: on a
    busy 2-core machine the two threads wait for each other (BENCH.md, "What a student costs the
    server": one paper CapsNet forward pass cost five times the CPU with two). Other sessions'
    work fills the second core instead. $CAPSVIZ_TORCH_THREADS sets another number (0:
    torch's own choice); $OMP_NUM_THREADS, when set (replicas set it), is kept."""
    wanted = os.environ.get("CAPSVIZ_TORCH_THREADS", "")
    if wanted.strip().isdigit():
        n = int(wanted)
    elif os.environ.get("OMP_NUM_THREADS"):
        n = 0
    else:
        n = 1
    if n and torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return torch.get_num_threads()


def autocast(device: torch.device, precision: str):
    if precision not in PRECISIONS:
        raise CapsvizError(t("unknown precision {name}; choose {choices}", name=repr(precision), choices=", ".join(PRECISIONS)))
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
