"""A native EM-routing kernel for matrix capsules on the CPU, forward and backward (em_routing.cpp).

Built on first use with the system's C++ compiler ($CXX, g++, clang++ or c++; GCC 9+ or clang)
into a cache folder and loaded with ctypes: no PyTorch headers and no build step at install.
Where there is no compiler, the build fails, or CAPSVIZ_NATIVE=0, `available()` is False and
capsviz routes with PyTorch, several times slower; `reason()` says why, and `capsviz doctor` and
the app's sidebar show it (through `capsviz.kernels.policy.paths`). A compiler without OpenMP (Apple's clang)
still builds it, running one image at a time. Results and gradients agree with the PyTorch path (tests/test_kernels_native.py),
and are bitwise the same for the same inputs however many threads run and whichever finishes first: the
backward adds the images' shares of the weight and bias gradients in image order (tests/test_determinism.py).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import torch
import torch.nn.functional as F

from capsviz import paths

# The switch is read here, where the kernel loads, and capsviz.kernels.policy names it beside the
# other switches: the policy asks this module whether the kernel is on, never the other way round.
NATIVE_ENV = "CAPSVIZ_NATIVE"
CPP_FILE = Path(__file__).with_name("em_routing.cpp")
# -march=native picks the vector width (AVX-512, AVX2, NEON) for this CPU; Apple's clang on arm64
# spells it -mcpu. The library's file name follows the platform.
MARCH = "-mcpu=native" if sys.platform == "darwin" and platform.machine() == "arm64" else "-march=native"
FLAGS = ["-O3", MARCH, "-shared", "-fPIC", "-std=c++17"]
OPENMP = "-fopenmp"
SUFFIX = {"win32": ".dll", "darwin": ".dylib"}.get(sys.platform, ".so")

_lib: ctypes.CDLL | None = None
_why: str | None = None
_path: Path | None = None
_note = ""  # how it was built, where that matters (no OpenMP)
_loading = threading.Lock()


def switched_off() -> str | None:
    """Why the environment turns the kernel off, or None where it leaves it on."""
    return f"turned off by {NATIVE_ENV}=0" if os.environ.get(NATIVE_ENV, "1") == "0" else None


def kernel_cache() -> Path:
    return paths.cache_dir() / "native"


def _cpu_signature() -> str:
    """-march=native code only runs where it was built: the library's name carries the CPU's flags
    (Linux), or at least its name and architecture elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        return platform.processor() + platform.machine()


def _compiler() -> str | None:
    return os.environ.get("CXX") or next(filter(None, map(shutil.which, ("g++", "clang++", "c++"))), None)


def _compile(cxx: str, flags: list[str]) -> Path:
    """The library built with these flags, from the cache when it was built before."""
    key = hashlib.sha256(CPP_FILE.read_bytes() + " ".join([cxx, *flags]).encode() + _cpu_signature().encode()).hexdigest()[:16]
    target = kernel_cache() / f"em_routing-{key}{SUFFIX}"
    if target.exists():
        return target
    # Processes starting together (app replicas, test workers) build it once: the others wait for
    # the lock, then find the library there.
    with paths.exclusive(kernel_cache() / f".em_routing-{key}.lock"):
        if not target.exists():
            _compile_into(cxx, flags, target)
    return target


def _compile_into(cxx: str, flags: list[str], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=SUFFIX, dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([cxx, *flags, str(CPP_FILE), "-o", tmp], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:  # the first error is the one a person can act on
            errors = [line for line in done.stderr.splitlines() if "error" in line] or done.stderr.strip().splitlines()[-1:]
            raise RuntimeError(f"{Path(cxx).name} could not build it: {errors[0][:300] if errors else f'exit {done.returncode}'}")
        os.replace(tmp, target)  # atomic: a reader never sees half a file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _build() -> ctypes.CDLL:
    global _path, _note
    cxx = _compiler()
    if not cxx:
        raise RuntimeError("no C++ compiler found (install g++ or clang, or set CXX)")
    try:
        target = _compile(cxx, [*FLAGS, OPENMP])
    except RuntimeError as with_openmp:
        try:
            target = _compile(cxx, FLAGS)
        except RuntimeError:
            raise with_openmp from None  # the first failure is the one that explains
        _note = "one thread: the compiler has no OpenMP"
    _path = target
    lib = ctypes.CDLL(str(target))
    fn = lib.capsviz_em_routing
    p, i64, c_int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    fn.argtypes = [p] * 7 + [i64] * 6 + [ctypes.c_float, c_int, p, c_int, p, p, p]
    fn.restype = c_int
    bw = lib.capsviz_em_routing_backward
    bw.argtypes = [p] * 7 + [i64] * 6 + [ctypes.c_float, c_int, p, c_int] + [p] * 8
    bw.restype = c_int
    size = lib.capsviz_em_trace_size
    size.argtypes = [i64, i64, i64, c_int]
    size.restype = i64
    return lib


def available() -> bool:
    """Whether the kernel is built and loaded (built on the first call, a few seconds; `capsviz
    app` and `capsviz doctor --build` make that call before any request)."""
    global _lib, _why
    if _lib is not None:
        return True
    with _loading:  # sessions arriving together wait for one build and load
        if _lib is not None or _why is not None:
            return _lib is not None
        why = switched_off()
        if why is None:
            try:
                _lib = _build()
            except (OSError, RuntimeError, AttributeError, subprocess.SubprocessError) as e:  # AttributeError: a symbol missing
                why = str(e)
        _why = why
        return _lib is not None


def reason() -> str | None:
    """Why the kernel is not in use, or None when it is."""
    return None if available() else _why


def note() -> str:
    """How the loaded kernel was built (", one thread: ..." where that matters) and where it lies."""
    return f"{', ' + _note if _note else ''} ({_path})" if available() else ""


def status() -> str:
    """One line for people: on (and how), or off and why."""
    why = reason()
    if why is not None:
        return f"off ({why}); EM routes through PyTorch, several times slower"
    return f"on{note()}"


def em_routing(
    poses: torch.Tensor,
    W: torch.Tensor,
    a_in: torch.Tensor,
    beta_u: torch.Tensor,
    beta_a: torch.Tensor,
    lower: torch.Tensor,
    lambdas: list[float],
    var_floor: float,
    offset: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """EM routing for B images with P routing groups (positions) each. poses (B, L, 16) and a_in
    (B, L) are the L lower capsules (4x4 poses flattened); lower (P, I) names the lower capsule in
    each of a position's I receptive-field slots, which the kernel gathers itself. Slot i votes
    pose @ W[i] (+ offset[i]); W (I, J, 4, 4), offset (I, 16). beta_u, beta_a broadcast to (J,).
    Returns activations a (B, P, J) and poses mu (B, P, J, 16), float32, differentiable with
    respect to poses, W, a_in and the betas (the backward kernel unrolls the routing from a trace
    the forward keeps when any of them requires grad). Requires `available()`."""
    return _EMRouting.apply(poses, W, a_in, beta_u, beta_a, lower, tuple(lambdas), var_floor, offset)


class _EMRouting(torch.autograd.Function):
    @staticmethod
    def forward(ctx, poses, W, a_in, beta_u, beta_a, lower, lambdas, var_floor, offset):
        B, L, _ = poses.shape
        P, I = lower.shape
        J = W.shape[1]
        pad = -I % 16  # slots padded to a multiple of 16: zero pose and activation, lower capsule L

        def slots_last(t: torch.Tensor, dtype=torch.float32, value=0.0) -> torch.Tensor:
            t = t.detach().to(dtype)
            return (F.pad(t, (0, pad), value=value) if pad else t).contiguous()

        def flat(t: torch.Tensor) -> torch.Tensor:
            return t.detach().to(dtype=torch.float32, memory_format=torch.contiguous_format)

        ins = [
            flat(poses),
            slots_last(W.reshape(I, J, 16).permute(1, 2, 0)),  # (J, 16, I)
            None if offset is None else slots_last(offset.t()),  # (16, I)
            flat(a_in),
            beta_u.detach().float().expand(J).contiguous(),
            beta_a.detach().float().expand(J).contiguous(),
            slots_last(lower, torch.int64, L),
        ]
        lam = torch.tensor(lambdas, dtype=torch.float32)
        sizes = (B, P, I + pad, I, J, L, var_floor, len(lambdas), lam.data_ptr(), torch.get_num_threads())
        a = torch.empty(B, P, J)
        mu = torch.empty(B, P, J, 16)
        # what the backward pass reads (~0.4 MB per small-config image), kept only when it will run
        trace = torch.empty(B, _lib.capsviz_em_trace_size(P, I + pad, J, len(lambdas))) if any(ctx.needs_input_grad) else None
        rc = _lib.capsviz_em_routing(*_ptrs(ins), *sizes, a.data_ptr(), mu.data_ptr(), None if trace is None else trace.data_ptr())
        if rc != 0:
            raise ValueError(f"native EM routing rejected its input (code {rc})")
        ctx.ins, ctx.lam, ctx.sizes, ctx.trace = ins, lam, sizes, trace  # lam: sizes holds its pointer
        ctx.meta = (poses.dtype, W.dtype, a_in.dtype, beta_u.shape, beta_a.shape)
        return a, mu

    @staticmethod
    def backward(ctx, gA, gMu):
        ins, sizes = ctx.ins, ctx.sizes
        pose_dt, w_dt, a_dt, bu_shape, ba_shape = ctx.meta
        B, P, Ip, I, J, L = sizes[:6]
        gA = torch.zeros(B, P, J) if gA is None else gA.float().contiguous()
        gMu = torch.zeros(B, P, J, 16) if gMu is None else gMu.float().contiguous()
        gposes, ga = torch.empty(B, L, 16), torch.empty(B, L)
        gW, gbu, gba = torch.empty(J, 16, Ip), torch.empty(J), torch.empty(J)
        outs = [gposes, ga, gW, gbu, gba]
        rc = _lib.capsviz_em_routing_backward(*_ptrs(ins), *sizes, gA.data_ptr(), gMu.data_ptr(), ctx.trace.data_ptr(), *_ptrs(outs))
        if rc != 0:
            raise ValueError(f"native EM routing rejected its input (code {rc})")
        g_W = gW[..., :I].permute(2, 0, 1).reshape(I, J, 4, 4).to(w_dt)
        g_bu = gbu if len(bu_shape) else gbu.sum()
        g_ba = gba if len(ba_shape) else gba.sum()
        return gposes.to(pose_dt), g_W, ga.to(a_dt), g_bu, g_ba, None, None, None, None


def _ptrs(tensors):
    return [None if t is None else t.data_ptr() for t in tensors]
