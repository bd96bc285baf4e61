"""What the "Why capsules" chapter does to a test image: moved (shifted or turned, `KINDS`) or its
parts moved (`SCHEMES`), and the names of each change."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from capsviz.data.affine import transform
from capsviz.i18n import N_

SHIFTS = (0, 1, 2, 3, 4)  # pixels to the right: up to twice the 2 px the paper trained with


ANGLES = (-30, -20, -10, 0, 10, 20, 30)  # degrees, positive anticlockwise: the range


KINDS = {"shift": SHIFTS, "rotate": ANGLES}


SCHEMES = ("halves", "sides", "quadrants")


SCHEME_NAMES = {
    "halves": N_("top and bottom halves swapped"),
    "sides": N_("left and right halves swapped"),
    "quadrants": N_("quadrants turned one place clockwise"),
}


# the same, short enough for a chart's axis on a phone
SCHEME_SHORT = {"halves": N_("halves swapped"), "sides": N_("sides swapped"), "quadrants": N_("quadrants turned")}


KIND_NAMES = {"shift": N_("pixels to the right"), "rotate": N_("degrees, anticlockwise")}


def moved(x: torch.Tensor, kind: str, amount: float) -> torch.Tensor:
    """x (B, C, H, W) in [0, 1] shifted `amount` pixels right (kind "shift", zeros come in from the
    left) or turned `amount` degrees anticlockwise about the centre (kind "rotate")."""
    if kind == "shift":
        k = int(amount)
        if k == 0:
            return x.clone()
        return F.pad(x, (k, 0, 0, 0))[..., : x.shape[-1]]  # (B, C, H, W)
    if kind == "rotate":
        a = math.radians(amount)
        # affine_grid samples the input at theta @ (x, y) with y pointing down: a positive angle here
        # turns the picture anticlockwise on screen
        theta = torch.tensor([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0]]).expand(x.shape[0], 2, 3)
        B, C, H, W = x.shape
        return transform(x.reshape(B * C, H, W), theta.repeat_interleave(C, 0)).view(B, C, H, W).clamp(0, 1)
    raise ValueError(f"unknown change {kind!r}; choose shift or rotate")


def scrambled(x: torch.Tensor, scheme: str) -> torch.Tensor:
    """x (B, C, H, W) with every part kept but moved (`SCHEMES`): the halves swapped top for
    bottom or left for right, or the four quadrants each moved one place clockwise."""
    H, W = x.shape[-2:]
    if scheme == "halves":
        return torch.roll(x, H // 2, dims=-2)
    if scheme == "sides":
        return torch.roll(x, W // 2, dims=-1)
    if scheme == "quadrants":
        if H % 2 or W % 2:
            raise ValueError(f"quadrants need an even size, not {H}x{W}")
        h, w = H // 2, W // 2
        out = torch.empty_like(x)
        out[..., :h, w:] = x[..., :h, :w]  # top left -> top right
        out[..., h:, w:] = x[..., :h, w:]  # top right -> bottom right
        out[..., h:, :w] = x[..., h:, w:]  # bottom right -> bottom left
        out[..., :h, :w] = x[..., h:, :w]  # bottom left -> top left
        return out
    raise ValueError(f"unknown scheme {scheme!r}; choose from {', '.join(SCHEMES)}")
