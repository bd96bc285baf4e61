"""Convolution as one GEMM over strided patches (im2col), and PyTorch's private ops that pre-pack
a GEMM weight for the batch-1 product, each used only where a check found it working."""

from __future__ import annotations

import functools

import torch

# Bytes of patch gradients folded at once: 16 paper-config images (3 MB each). A whole batch's
# would match the saved patches in size; smaller models fold more images per slice.
FOLD_BYTES = 48 * 2**20


def im2col(x: torch.Tensor, kernel: int, stride: int) -> tuple[torch.Tensor, int, int]:
    """Contiguous NHWC x (B, H, W, C) -> patches (B*Ho*Wo, K*K*C) in (kh, kw, c) order, one copy."""
    B, H, W, C = x.shape
    Ho, Wo = (H - kernel) // stride + 1, (W - kernel) // stride + 1
    sb, sh, sw, sc = x.stride()
    patches = x.as_strided((B, Ho, Wo, kernel, kernel, C), (sb, sh * stride, sw * stride, sh, sw, sc))  # (B, Ho, Wo, K, K, C)
    return patches.reshape(B * Ho * Wo, kernel * kernel * C), Ho, Wo


def gemm_layout(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(Cout, Cin, K, K) -> (Cout, K*K*Cin) in (kh, kw, c) order, the im2col GEMM's layout."""
    return weight.permute(0, 2, 3, 1).reshape(weight.shape[0], -1).to(dtype)  # (Cout, K*K*Cin)


class Im2colConv(torch.autograd.Function):
    """Valid convolution of an NHWC tensor as one GEMM over strided patches.

    oneDNN's kernels for PrimaryCaps' 9x9 stride-2 convolution onto a 6x6 grid reach about half
    of a CPU's GEMM speed and leave AMX idle in bfloat16; gathering the patches through a
    strided view and doing one large matmul is faster, most of all in bfloat16.
    """

    @staticmethod
    def forward(ctx, x, w, kernel, stride):
        cols, Ho, Wo = im2col(x, kernel, stride)
        # The patches are gathered again in backward rather than kept: they are 7x the input's
        # size (380 MB for a 128-image paper-CapsNet batch), in float32 the input is the ReLU
        # output autograd keeps anyway, and the copy costs a few percent of the step.
        ctx.save_for_backward(x, w)
        ctx.geom = (kernel, stride, Ho, Wo)
        return (cols @ w.t()).view(x.shape[0], Ho, Wo, -1)  # (B, Ho, Wo, Cout)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        k, s, Ho, Wo = ctx.geom
        shape = x.shape
        g2 = g.reshape(-1, g.shape[-1])  # (B*Ho*Wo, Cout)
        gw = g2.t() @ im2col(x, k, s)[0] if ctx.needs_input_grad[1] else None
        gx = None
        if ctx.needs_input_grad[0]:
            gx = g.new_zeros(shape)
            n = max(1, FOLD_BYTES // (Ho * Wo * w.shape[1] * g.element_size()))  # images per slice
            for b0 in range(0, shape[0], n):
                gcols = (g[b0 : b0 + n].reshape(-1, g.shape[-1]) @ w).view(-1, Ho, Wo, k, k, shape[3])  # (n, Ho, Wo, K, K, Cin)
                gxb = gx[b0 : b0 + n]
                for kh in range(k):  # fold: one strided add per kernel offset
                    for kw in range(k):
                        gxb[:, kh : kh + s * (Ho - 1) + 1 : s, kw : kw + s * (Wo - 1) + 1 : s] += gcols[:, :, :, kh, kw]
        return gx, gw, None, None


# PyTorch's private ops for pre-packed GEMM weights: not part of its public API, so they may be
# missing or change signature in another torch version. Each is looked up by name here and used
# only where `mkl_packed_gemm` / `onednn_bf16_gemm` found it working; otherwise the public
# im2col GEMM runs (tests/test_private_ops.py makes each unavailable in turn).
PRIVATE_OPS = {
    "mkl_reorder": ("mkl", "_mkl_reorder_linear_weight"),
    "mkl_linear": ("mkl", "_mkl_linear"),
    "onednn_reorder": ("mkldnn", "_reorder_linear_weight"),
    "onednn_linear": ("mkldnn", "_linear_pointwise"),
}


def private_op(name: str):
    """torch.ops.<namespace>.<op> for a PRIVATE_OPS entry, or None where this torch lacks it."""
    namespace, op = PRIVATE_OPS[name]
    try:
        return getattr(getattr(torch.ops, namespace), op)
    except (AttributeError, RuntimeError):  # torch raises either for an unknown op, by version
        return None


def packed_matmul(kind: str, cols: torch.Tensor, packed: torch.Tensor, w: torch.Tensor, rows: int) -> torch.Tensor:
    """cols (M, K) @ w.t() (K, N) through a weight pre-packed by `pack_gemm_weight` -> (M, N)."""
    if kind == "mkl":
        return private_op("mkl_linear")(cols, packed, w, None, rows)
    return private_op("onednn_linear")(cols, packed, None, "none", [], "")


def _packing_works(kind: str, dtype: torch.dtype) -> bool:
    """Whether `kind`'s ops exist here and give a small product's right answer: a changed
    signature or an unsupported CPU raises or differs, and the plain GEMM serves instead."""
    reorder = private_op(f"{kind}_reorder")
    if reorder is None or private_op(f"{kind}_linear") is None:
        return False
    x, w = torch.rand(4, 16, dtype=dtype), torch.rand(8, 16, dtype=dtype)
    try:
        got = packed_matmul(kind, x, reorder(w, 4), w, 4)
    except (RuntimeError, TypeError, ValueError):
        return False
    return got.shape == (4, 8) and torch.allclose(got.float(), (x @ w.t()).float(), rtol=0.02, atol=0.02)


@functools.cache
def mkl_packed_gemm() -> bool:
    """Whether MKL pre-packs float32 GEMM weights in this torch build."""
    return torch.backends.mkl.is_available() and _packing_works("mkl", torch.float32)


@functools.cache
def onednn_bf16_gemm() -> bool:
    """Whether oneDNN packs bfloat16 GEMM weights on this CPU: it needs AVX-512 (BW, VL, DQ) or
    AVX-NE-CONVERT and raises elsewhere (an AVX2-only CPU, say), where the plain GEMM serves."""
    return torch.backends.mkldnn.is_available() and _packing_works("onednn", torch.bfloat16)


def pack_gemm_weight(w: torch.Tensor, rows: int, kind: str) -> tuple[torch.Tensor, int, str]:
    """A GEMM weight (N, K) pre-packed for (rows, K) @ (K, N) products by `kind` ("mkl" in float32,
    "onednn" in bfloat16 with AMX; `policy.packed_gemm` says which works here). For the paper's
    PrimaryCaps at batch 1 (36 x 20736 @ 20736 x 256) the packed float32 product takes about 2/3
    of the plain one's time (the packed copy is ~3x the weight's size)."""
    return private_op(f"{kind}_reorder")(w, rows), rows, kind
