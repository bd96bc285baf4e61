"""Large-kernel convolution through the Fourier domain, for the CPU in float32.

PrimaryCaps' 9x9 stride-2 convolution is ~95% of a CapsNet's arithmetic: per image 36 output
positions x 81 taps = 2,916 products of a (256 x 256) channel matrix in the paper model. By the
convolution theorem, a correlation is a per-frequency product of spectra: each of the 19 x 10
frequencies of a 19x19 transform (enough that nothing wraps around onto a needed output; the half
spectrum suffices because images are real) costs one complex channel product, 3 real ones by
Gauss's trick, so 570 in all, 5.1x fewer. The transforms are small real matrices (direct DFTs of
any length, no FFT library) applied along one axis at a time; they cost ~20% of the channel
products' multiply-adds, and their layouts are chosen so that every step is one large GEMM and
nothing is transposed in memory except the input and the output, once each. The inverse transform
computes only the strided outputs.

Exact in exact arithmetic; in float32 the results match the direct convolution to a few 1e-7, relative.
The gradients are the adjoint transforms (transposed matrices), written out by hand so that no
spectrum-sized buffer outlives its use: the backward pass keeps the input's spectrum and recomputes
the weight's (a few GEMMs) instead of holding it.

Layouts: ri = real/imaginary; kh = all Nh vertical frequencies; kw = Nw // 2 + 1 horizontal ones;
F = Nh * kw. Input spectrum (2, F, B, C); weight spectrum (2, F, O, C), its complex conjugate
folded in so the product gives a correlation; output spectrum (2, F, B, O).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Plan:
    """The transform matrices for one geometry (input H x W, kernel k, stride s), float32."""

    Ho: int
    Wo: int
    Nh: int
    Nw: int
    Fw: int
    D1: torch.Tensor  # (2Fw, Nw): image rows -> horizontal half spectrum, rows (ri, kw)
    D2: torch.Tensor  # (2Nh, 2Nh): (h, ri) -> (ri, kh), the vertical complex transform
    E1: torch.Tensor  # (2Fw, k): kernel rows -> conjugate horizontal spectrum
    E2: torch.Tensor  # (2Nh, 2k): (a, ri) -> (ri, kh), conjugate vertical transform of the kernel
    A: torch.Tensor  # (2Ho, 2Nh): (ri, kh) -> (m, ri), inverse vertical transform at rows s*m only
    G: torch.Tensor  # (Wo, 2Fw): (ri, kw) -> real outputs at columns s*n, Hermitian weights folded in


def _angles(rows: int, cols: int, n: int, step: int = 1) -> torch.Tensor:
    r = torch.arange(rows, dtype=torch.float64)[:, None]
    c = torch.arange(cols, dtype=torch.float64)[None, :]
    return 2 * math.pi * (r * step * c % n) / n


def _complex_block(theta: torch.Tensor, sign: float) -> torch.Tensor:
    """Multiplying by e^(sign*i*theta) (theta: out x in) as a real (ri_out, ri_in, out, in) array;
    callers permute it to the row and column order of their layouts."""
    c, s = theta.cos(), sign * theta.sin()
    return torch.stack([torch.stack([c, -s]), torch.stack([s, c])])


@functools.lru_cache(maxsize=16)
def plan(H: int, W: int, k: int, stride: int) -> Plan:
    Ho, Wo = (H - k) // stride + 1, (W - k) // stride + 1
    Nh, Nw = stride * (Ho - 1) + k, stride * (Wo - 1) + k  # the rows and columns any output reads
    Fw = Nw // 2 + 1
    # forward transform of the image, e^(-i): rows along w first (real -> half spectrum)
    t = _angles(Fw, Nw, Nw)
    D1 = torch.cat([t.cos(), -t.sin()])
    m = _complex_block(_angles(Nh, Nh, Nh), -1.0)  # (ro, ri, kh, h)
    D2 = m.permute(0, 2, 3, 1).reshape(2 * Nh, 2 * Nh)  # rows (ro, kh), cols (h, ri)
    # conjugate spectrum of the kernel, e^(+i), so that X * W gives a correlation
    t = _angles(Fw, k, Nw)
    E1 = torch.cat([t.cos(), t.sin()])
    m = _complex_block(_angles(Nh, k, Nh), 1.0)  # (ro, ri, kh, a)
    E2 = m.permute(0, 2, 3, 1).reshape(2 * Nh, 2 * k)  # rows (ro, kh), cols (a, ri)
    # inverse: outputs only at rows stride*m and columns stride*n
    m = _complex_block(_angles(Ho, Nh, Nh, stride), 1.0)  # (ro, ri, m, kh)
    A = m.permute(2, 0, 1, 3).reshape(2 * Ho, 2 * Nh)  # rows (m, ro), cols (ri, kh)
    t = _angles(Wo, Fw, Nw, stride)  # (n, kw)
    weight = torch.full((Fw,), 2.0, dtype=torch.float64)  # each kw > 0 stands for itself and -kw
    weight[0] = 1.0
    if Nw % 2 == 0:
        weight[-1] = 1.0
    weight /= Nh * Nw
    G = torch.cat([t.cos() * weight, -t.sin() * weight], 1)
    f = functools.partial(torch.Tensor.to, dtype=torch.float32)
    return Plan(Ho, Wo, Nh, Nw, Fw, f(D1), f(D2), f(E1), f(E2), f(A), f(G))


def cheaper(H: int, W: int, C: int, O: int, k: int, stride: int) -> bool:
    """Whether this geometry's Fourier product should beat the im2col GEMM per image on a CPU
    (`python -m capsviz bench --convolutions` measures the crossovers): at most half the direct
    convolution's multiply-adds in channel products (counted as four real products per
    frequency, Gauss's saving aside), and transforms no dearer than those products. PrimaryCaps
    qualifies in every CapsNet preset; Conv1 (one input channel: all transform) does not. The
    batch size is `policy.conv_path`'s to judge."""
    if H < k or W < k:
        return False
    p = plan(H, W, k, stride)
    mix = 4 * p.Nh * p.Fw * C * O  # per image
    transforms = C * (p.Nh * p.Nw * 2 * p.Fw + 4 * p.Nh * p.Nh * p.Fw) + O * (4 * p.Ho * p.Nh * p.Fw + 2 * p.Ho * p.Wo * p.Fw)
    return 2 * mix <= p.Ho * p.Wo * k * k * C * O and transforms <= mix


def weight_spectrum(w: torch.Tensor, p: Plan) -> torch.Tensor:
    """(O, C, k, k) -> (2, F, O, C): two GEMMs, the first reading the weight in place."""
    O, C, k, _ = w.shape
    U = torch.matmul(p.E1, w.reshape(O * C, k, k).permute(1, 2, 0))  # (a, 2Fw, OC)
    return (p.E2 @ U.view(2 * k, -1)).view(2, p.Nh * p.Fw, O, C)


def _complex_bmm(ar, ai, br, bi, out: torch.Tensor, conj_b: bool = False) -> torch.Tensor:
    """out[0] + i*out[1] = (ar + i*ai) @ (br -+ i*bi) per frequency, by Gauss's three real
    products instead of four: P1 = ar@br, P2 = ai@bi, P3 = (ar + ai)@(br -+ bi)."""
    s = -1.0 if conj_b else 1.0
    torch.bmm(ar, br, out=out[0])  # P1
    torch.bmm(ar + ai, br - bi if conj_b else br + bi, out=out[1])  # P3
    p2 = torch.bmm(ai, bi)
    out[1].sub_(out[0]).sub_(p2, alpha=s)  # imag = P3 - P1 - s*P2
    out[0].sub_(p2, alpha=s)  # real = P1 - s*P2
    return out


class _FourierConv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, stride):
        B, H, W, C = x.shape
        O, _, k, _ = w.shape
        p = plan(H, W, k, stride)
        F = p.Nh * p.Fw
        xs = x[:, : p.Nh, : p.Nw].permute(1, 2, 0, 3).reshape(p.Nh, p.Nw, B * C)
        T1 = torch.matmul(p.D1, xs)  # (h, (ri, kw), BC)
        del xs
        X = (p.D2 @ T1.view(2 * p.Nh, -1)).view(2, F, B, C)
        del T1
        Ws = weight_spectrum(w, p).transpose(2, 3)  # (2, F, C, O)
        Y = _complex_bmm(X[0], X[1], Ws[0], Ws[1], x.new_empty(2, F, B, O))
        del Ws
        Z = (p.A @ Y.view(2 * p.Nh, -1)).view(p.Ho, 2 * p.Fw, B * O)  # (m, (ri, kw), BO)
        del Y
        y = torch.matmul(p.G, Z).view(p.Ho, p.Wo, B, O)
        ctx.save_for_backward(X if ctx.needs_input_grad[1] else None, w if ctx.needs_input_grad[0] else None)
        ctx.p, ctx.shape = p, x.shape
        return y.permute(2, 0, 1, 3)  # (B, Ho, Wo, O)

    @staticmethod
    def backward(ctx, g):
        X, w = ctx.saved_tensors
        p, (B, H, W, C) = ctx.p, ctx.shape
        O = g.shape[-1]
        F = p.Nh * p.Fw
        gZ = torch.matmul(p.G.t(), g.permute(1, 2, 0, 3).reshape(p.Ho, p.Wo, B * O))
        gY = (p.A.t() @ gZ.view(2 * p.Ho, -1)).view(2, F, B, O)
        del gZ
        gx = gw = None
        if ctx.needs_input_grad[0]:
            Ws = weight_spectrum(w, p)
            # the adjoint of Y = X @ W^T: gX = gY @ conj(W) (no transpose in the (F, O, C) layout)
            gX = _complex_bmm(gY[0], gY[1], Ws[0], Ws[1], g.new_empty(2, F, B, C), conj_b=True)
            del Ws
            gT1 = (p.D2.t() @ gX.view(2 * p.Nh, -1)).view(p.Nh, 2 * p.Fw, B * C)
            del gX
            gxs = torch.matmul(p.D1.t(), gT1).view(p.Nh, p.Nw, B, C)
            del gT1
            if (p.Nh, p.Nw) == (H, W):
                gx = gxs.permute(2, 0, 1, 3).contiguous()
            else:  # rows and columns no output reads get no gradient (zeroed alone: filling the whole buffer first writes it twice)
                gx = g.new_empty(B, H, W, C)
                gx[:, : p.Nh, : p.Nw] = gxs.permute(2, 0, 1, 3)
                gx[:, p.Nh :].zero_()
                gx[:, : p.Nh, p.Nw :].zero_()
        if ctx.needs_input_grad[1]:
            k = p.E1.shape[1]
            # the adjoint for the weight: gW = gY^T @ conj(X) per frequency, planes (O, C)
            gYt = gY.transpose(2, 3)  # (2, F, O, B)
            gW = _complex_bmm(gYt[0], gYt[1], X[0], X[1], X.new_empty(2, F, O, C), conj_b=True)
            gU = (p.E2.t() @ gW.view(2 * p.Nh, -1)).view(k, 2 * p.Fw, O * C)
            del gW
            gw = torch.matmul(p.E1.t(), gU).view(k, k, O, C).permute(2, 3, 0, 1).contiguous()
        return gx, gw, None


def conv2d(x: torch.Tensor, w: torch.Tensor, stride: int) -> torch.Tensor:
    """Valid correlation of NHWC float32 `x` (B, H, W, C) with `w` (O, C, k, k) on the CPU, no
    bias: (B, Ho, Wo, O), differentiable in both."""
    return _FourierConv.apply(x, w, stride)
