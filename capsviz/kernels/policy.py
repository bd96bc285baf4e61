"""Which fast path runs where, every switch in one place, and why a path is off.

The capsule layers and routing functions compute the papers' formulas in plain PyTorch; each asks
one question of this module before it may take a faster path instead. The answers depend on the
device, the dtype, the batch size and three switches:

- `CAPSVIZ_NATIVE=0` (environment, read where the kernel loads: capsviz.kernels.native): no native
  EM kernel, as on a machine without a compiler.
- `compile_em()`: route matrix capsules through a torch.compile'd EM core (`--compile`).
- `reference_only()`: a context manager under which every layer runs its reference computation,
  for tests and for reading the code path by path.

`paths(device)` lists every path as (path, on, reason); `capsviz doctor` and the app's sidebar show it.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

import torch

from capsviz.i18n import t
from capsviz.kernels import fourier, gemm, native

# The path names `paths` reports, one per fast path
FOURIER = "Fourier convolution"
IM2COL = "im2col GEMM convolution"
MKL_PACKED = "MKL packed GEMM (batch 1, float32)"
ONEDNN_PACKED = "oneDNN packed GEMM (batch 1, bfloat16)"
VOTE_GEMM = "DigitCaps vote GEMM"
HAND_BACKWARD = "dynamic routing hand backward"
NATIVE_EM = "native EM kernel"
CENTRED_EM = "ConvCaps centred vote GEMM"
COMPILED_EM = "compiled EM core"
SLICES = "batch slices in cache"

# Below this many images the Fourier path's weight transform, a fixed cost per call, outweighs the
# per-image saving and the im2col GEMM serves (`python -m capsviz bench --convolutions` shows the crossover).
MIN_BATCH = 32


class _State(threading.local):
    """The switches below, per thread: a browser session's request, a training run on the app's
    queue and a test each set their own, and never change what another thread computes."""

    reference = False
    compile_em = False


_state = _State()


@dataclass(frozen=True)
class PathStatus:
    path: str
    on: bool
    reason: str


@contextlib.contextmanager
def reference_only(on: bool = True):
    """Within this block every layer and routing function runs its reference computation."""
    before = _state.reference
    _state.reference = on
    try:
        yield
    finally:
        _state.reference = before


def fast() -> bool:
    """Whether fast paths may run at all (False inside `reference_only`)."""
    return not _state.reference


def compile_em(on: bool = True) -> None:
    """Route EM through a torch.compile'd core from now on (or not): the compiler fuses the E- and
    M-step loops, which speeds up matrix-capsule training on the CPU. Compiling the whole
    model is slower: the scatter over receptive fields breaks its graph into small pieces."""
    _state.compile_em = on


def compiled_em() -> bool:
    return fast() and _state.compile_em


def _cpu(x: torch.Tensor) -> bool:
    return fast() and x.device.type == "cpu"


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype matmuls on x's device compute in: autocast's when it is on, else x's own."""
    kind = x.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else x.dtype


def conv_path(x: torch.Tensor, weight: torch.Tensor, stride: int) -> str | None:
    """How to convolve NHWC `x` (B, H, W, Cin) with `weight` (Cout, Cin, K, K): "fourier",
    "im2col" (a GEMM over strided patches, pre-packed at batch 1 where `packed_gemm` allows), or
    None for the reference F.conv2d (cuDNN / MPS off the CPU).

    On the CPU oneDNN's kernels for a large kernel over many channels (PrimaryCaps' 9x9 stride 2)
    reach about half the GEMM's speed; with one input channel (Conv1) they are fine at inference,
    but its weight gradient in float32 is slow, so float32 training takes the GEMM there too."""
    if not _cpu(x):
        return None
    B, H, W, C = x.shape
    O, _, k, _ = weight.shape
    dtype = compute_dtype(x)
    if dtype == torch.float32 and B >= MIN_BATCH and fourier.cheaper(H, W, C, O, k, stride):
        return "fourier"
    if C == 1 and not (torch.is_grad_enabled() and dtype == torch.float32):
        return None
    return "im2col"


def packed_gemm(dtype: torch.dtype) -> str | None:
    """Which private ops pre-pack a GEMM weight of `dtype` on this CPU: "mkl", "onednn" or None."""
    if not fast():
        return None
    if dtype == torch.float32 and gemm.mkl_packed_gemm():
        return "mkl"
    if dtype == torch.bfloat16 and gemm.onednn_bf16_gemm():
        return "onednn"
    return None


def vote_gemm(W: torch.Tensor) -> bool:
    """DigitCaps' predictions as one small matmul per lower capsule, its weight laid out once per
    version at inference: at batch 1 that copy of the weights took as long as the matmul itself."""
    return fast()


def hand_backward(u_hat: torch.Tensor, record: bool) -> bool:
    """Dynamic routing's gradient written out by hand: float32/float64 outside autocast, no trace."""
    return (
        fast()
        and not record
        and u_hat.requires_grad
        and u_hat.dtype in (torch.float32, torch.float64)
        and not torch.is_autocast_enabled(u_hat.device.type)
    )


def native_em(x: torch.Tensor) -> bool:
    """Route matrix capsules with the fused native kernel (forward and backward): on the CPU,
    where it could be built."""
    return _cpu(x) and native.available()


def centred_em(x: torch.Tensor) -> bool:
    """ConvCaps' votes made centred and scaled by one GEMM per receptive-field slot."""
    return fast()


def paths(device: torch.device | str = "cpu") -> list[PathStatus]:
    """Every fast path on `device`: (path, on, reason)."""
    device = torch.device(device)
    cpu = device.type == "cpu"
    off_cpu = t("a CPU path; {device} runs the reference", device=device.type)
    out = []

    def add(path: str, on: bool, why_on: str, why_off: str) -> None:
        if not fast():
            on, why_off = False, t("reference_only() is on")
        out.append(PathStatus(path, on, why_on if on else why_off))

    add(FOURIER, cpu, t("CPU float32 batches of {n}+ with large kernels over many channels", n=MIN_BATCH), off_cpu)
    add(IM2COL, cpu, t("CPU convolutions the Fourier path does not take"), off_cpu)
    missing = [n for n in gemm.PRIVATE_OPS if gemm.private_op(n) is None]
    absent = t("missing private ops: {ops}", ops=", ".join(missing)) if missing else t("this torch build or CPU refuses it")
    add(MKL_PACKED, cpu and gemm.mkl_packed_gemm(), t("PrimaryCaps at batch 1"), off_cpu if not cpu else absent)
    add(ONEDNN_PACKED, cpu and gemm.onednn_bf16_gemm(), t("PrimaryCaps at batch 1 under bfloat16"), off_cpu if not cpu else absent)
    add(VOTE_GEMM, True, t("every device"), "")
    add(HAND_BACKWARD, True, t("float32/float64 training outside autocast"), "")
    why = native.reason() if cpu else None
    add(NATIVE_EM, cpu and why is None, t("matrix capsules on the CPU{how}", how=native.note()), off_cpu if not cpu else str(why))
    add(CENTRED_EM, True, t("matrix capsules where the native kernel is off"), "")
    add(COMPILED_EM, _state.compile_em, t("turned on by --compile"), t("turned on by --compile only"))
    add(SLICES, cpu, t("CPU batches routed in cache-sized slices"), off_cpu)
    return out


def why_off(path: str, device: torch.device | str = "cpu") -> str | None:
    """The reason `path` is off on `device`, or None when it is on."""
    status = next(p for p in paths(device) if p.path == path)
    return None if status.on else status.reason
