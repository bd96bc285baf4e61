"""Routing a CPU batch in slices small enough to stay in cache, and how large those slices are."""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from capsviz.kernels import policy

# Bytes of u_hat routed at once: 8 paper-config images (5.9 MB), or 32 capsnet-small ones, small
# enough to stay in cache.
ROUTING_BYTES = 6 * 2**20
# Bytes of u_hat whose slices keep their activations in training rather than recompute them in
# backward: every image of a paper-config batch of 128, since PrimaryCaps convolves through the
# Fourier domain and needs less memory.
ROUTING_KEEP_BYTES = 96 * 2**20
# EM's PyTorch path (the native kernel needs none): images routed at once, keeping each slice's
# votes (~3 MB per small-config image) near the cache
EM_CHUNK = 8
# Votes whose slices keep their activations in training instead of recomputing them in backward:
# 96 small-config images (0.82M votes each; ~1.6 GB peak at batch 128), 15 paper-config ones.
# Recomputing them would cost a large part of a training step; beyond this the slices are checkpointed.
EM_KEEP_VOTES = 80_000_000


def dynamic_slices(u_hat_bytes_per_image: int) -> tuple[int, int]:
    """`in_chunks`' chunk and keep for dynamic routing, from the bytes of one image's u_hat."""
    return max(1, ROUTING_BYTES // u_hat_bytes_per_image), ROUTING_KEEP_BYTES // u_hat_bytes_per_image


def em_slices(x: torch.Tensor, votes_per_image: int) -> tuple[int, int]:
    """`in_chunks`' chunk and keep for a matrix-capsule batch x. The native kernel routes one image
    at a time in cache and keeps a small trace per image for its backward (~0.4 MB for the small
    config): it needs no slices."""
    chunk = x.shape[0] if policy.native_em(x) else EM_CHUNK
    return chunk, EM_KEEP_VOTES // votes_per_image


def in_chunks(fn, *xs: torch.Tensor, chunk: int, keep: int = 0):
    """fn over slices of the batch, small enough to keep the routing tensors in the CPU's cache.

    With gradients on, each slice after the first `keep` images is checkpointed: only its inputs
    are kept and its forward is recomputed (still in cache) during backward. Peak memory then
    grows with `keep` + `chunk`, not the batch; that matters most for EM, whose votes are ~0.8M
    floats per image. The first `keep` images keep their activations and skip the recompute.
    Off the CPU the whole batch goes at once: on a GPU slices only multiply the kernel launches,
    and slices of a few images leave it mostly idle.
    """
    if xs[0].shape[0] <= chunk or not policy.fast() or xs[0].device.type != "cpu":
        return fn(*xs)
    outs, done = [], 0
    for p in zip(*(x.split(chunk) for x in xs), strict=True):
        done += p[0].shape[0]
        outs.append(checkpoint(fn, *p, use_reentrant=False) if torch.is_grad_enabled() and done > keep else fn(*p))
    if isinstance(outs[0], tuple):
        return tuple(torch.cat(o) for o in zip(*outs, strict=True))
    return torch.cat(outs)
