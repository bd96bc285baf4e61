"""The fast convolutions behind one call: Fourier domain, im2col GEMM, or the pre-packed GEMM."""

from __future__ import annotations

import torch

from capsviz.kernels import fourier, policy
from capsviz.kernels.gemm import Im2colConv, gemm_layout, im2col, pack_gemm_weight, packed_matmul


class WeightCache:
    """A conv weight in the GEMM's layout, made once per weight version at inference (6 ms for the
    paper's PrimaryCaps, per call otherwise), and for a single image also pre-packed (the first
    batch-1 call pays for it). The version counter changes with every in-place update, so
    training never sees stale weights.

    A cached model serves many browser sessions at once, so the cache is one immutable entry
    (key, layout, packed) replaced whole: a thread reads either the old entry or the new one,
    never a key beside another version's layout. Two first calls may both build it; one wins."""

    def __init__(self):
        self.entry: tuple | None = None  # (key, layout, packed or None)

    @property
    def packed(self) -> tuple[torch.Tensor, int, str] | None:
        return None if self.entry is None else self.entry[2]

    def get(self, weight: torch.Tensor, dtype: torch.dtype, x: torch.Tensor, stride: int):
        """(layout, packed or None) for convolving `x` at inference; (None, None) in training."""
        if torch.is_grad_enabled():
            return None, None
        key = (weight._version, dtype, weight.data_ptr())
        entry = self.entry
        if entry is None or entry[0] != key:
            entry = (key, gemm_layout(weight.detach(), dtype), None)
        kind = policy.packed_gemm(dtype) if x.shape[0] == 1 and entry[2] is None else None
        if kind is not None:
            rows = ((x.shape[1] - weight.shape[-1]) // stride + 1) ** 2  # output positions of one image
            entry = (key, entry[1], pack_gemm_weight(entry[1], rows, kind))
        self.entry = entry
        return entry[1], entry[2]


def conv2d_nhwc(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: int, path: str, cache: WeightCache | None = None
) -> torch.Tensor:
    """Valid conv of NHWC `x` (B, H, W, Cin) with an nn.Conv2d-shaped weight -> (B, Ho, Wo, Cout)
    along `path` ("fourier" or "im2col", from `policy.conv_path`), honouring autocast. `cache`
    keeps the weight's GEMM layout (and packed copy) between inference calls."""
    k = weight.shape[-1]
    if path == "fourier":
        with torch.autocast("cpu", enabled=False):
            y = fourier.conv2d(x.float().contiguous(), weight.float(), stride)  # (B, Ho, Wo, Cout)
            return y if bias is None else y + bias.float()
    dtype = policy.compute_dtype(x)
    w, packed = cache.get(weight, dtype, x, stride) if cache is not None else (None, None)
    w = gemm_layout(weight, dtype) if w is None else w
    with torch.autocast("cpu", enabled=False):
        x = x.to(dtype).contiguous()
        if packed is not None:  # other heights than the packed one still work (an ordinary linear then)
            cols, Ho, Wo = im2col(x, k, stride)  # (B*Ho*Wo, K*K*Cin)
            y = packed_matmul(packed[2], cols, packed[0], w, packed[1]).view(x.shape[0], Ho, Wo, -1)  # (B, Ho, Wo, Cout)
        else:
            y = Im2colConv.apply(x, w, k, stride)  # (B, Ho, Wo, Cout)
        return y if bias is None else y + bias.to(dtype)
