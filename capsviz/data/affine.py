"""Affine robustness data (Sabour et al. 5.2): expanded MNIST for training and an affNIST-like
test set, both 40x40.

affNIST itself applies to each MNIST digit a random rotation within +-20 degrees, shear within
+-0.2, scale 0.8-1.2 per axis and a translation that keeps the digit inside 40x40. We draw from
the same ranges, so the generated test set has the same kind and size of distortion as the real
one, from MNIST test digits the model has never seen. The real affNIST ships as MATLAB .mat
files; reading them would add scipy as a dependency for one test set, so capsviz does not read
them: `affnist_like` is the stand-in, and RESULTS.md says how it differs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from capsviz.data.transforms import place

SIZE = 40
ROTATION_DEG = 20.0
SHEAR = 0.2
SCALE = (0.8, 1.2)


def expanded(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Each 28x28 digit placed at a random position on a black 40x40 canvas -> (B, 40, 40) float."""
    B = images.shape[0]
    off = torch.randint(0, SIZE - 28 + 1, (2, B), generator=generator)
    return place(images.float().div(255.0), SIZE, off[0], off[1])


def affine_matrices(n: int, generator: torch.Generator, strength: float = 1.0) -> torch.Tensor:
    """(n, 2, 3) random affine maps with every range scaled by `strength` (1 = affNIST's)."""
    u = lambda: torch.rand(n, generator=generator) * 2 - 1  # noqa: E731 - uniform in [-1, 1]
    angle = u() * math.radians(ROTATION_DEG) * strength
    shear = u() * SHEAR * strength
    half = (SCALE[1] - SCALE[0]) / 2  # scale = 1 +- 0.2
    sx = 1 + u() * half * strength
    sy = 1 + u() * half * strength
    cos, sin = torch.cos(angle), torch.sin(angle)
    rot = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)  # (n, 2, 2)
    sh = torch.eye(2).repeat(n, 1, 1)
    sh[:, 0, 1] = shear
    sc = torch.diag_embed(torch.stack([sx, sy], -1))
    A = rot @ sh @ sc
    return torch.cat([A, torch.zeros(n, 2, 1)], -1)


def transform(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Apply (B, 2, 3) maps (in normalised coordinates, about the centre) to (B, H, W) images."""
    grid = F.affine_grid(theta, (x.shape[0], 1, *x.shape[-2:]), align_corners=False)
    return F.grid_sample(x.unsqueeze(1), grid, align_corners=False, padding_mode="zeros").squeeze(1)


def affnist_like(images: torch.Tensor, seed: int = 0, strength: float = 1.0) -> torch.Tensor:
    """MNIST test digits (B, 28, 28) uint8 -> (B, 40, 40) float: centred on 40x40, randomly
    rotated, sheared and scaled, then translated so the ink stays inside the canvas."""
    g = torch.Generator().manual_seed(seed)
    B = images.shape[0]
    centred = place(images.float().div(255.0), SIZE, torch.full((B,), 6), torch.full((B,), 6))
    warped = transform(centred, affine_matrices(B, g, strength))
    return _random_translate(warped, g)


def _random_translate(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Move each image's ink bounding box to a random position that keeps it on the canvas."""
    B, H, W = x.shape
    ink = x > 0.05
    rows, cols = ink.any(2), ink.any(1)  # (B, H), (B, W)
    ar = torch.arange(H)
    top = torch.where(rows, ar, H).amin(1)
    bottom = torch.where(rows, ar, -1).amax(1)
    left = torch.where(cols, ar, W).amin(1)
    right = torch.where(cols, ar, -1).amax(1)
    empty = bottom < 0
    dy = (torch.rand(B, generator=g) * (H - (bottom - top))).long() - top
    dx = (torch.rand(B, generator=g) * (W - (right - left))).long() - left
    dy[empty], dx[empty] = 0, 0
    r = (torch.arange(H).view(1, H) - dy.view(B, 1)).clamp(-1, H)  # source row per target row
    c = (torch.arange(W).view(1, W) - dx.view(B, 1)).clamp(-1, W)
    padded = F.pad(x, (1, 1, 1, 1))
    return padded[torch.arange(B).view(B, 1, 1), (r + 1).view(B, H, 1), (c + 1).view(B, 1, W)]
