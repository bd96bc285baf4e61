"""Efficient-CapsNet's config and preset; every field declares what a checkpoint file may hold for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from capsviz.bounds import MAX_SIZE, MIN_SIZE, bounded
from capsviz.families.efficient_capsnet import FAMILY
from capsviz.i18n import t


@dataclass(frozen=True)
class EfficientCapsConfig:
    """Efficient-CapsNet (Mazzia et al. 2021): a BatchNorm conv stack, depthwise primary capsules
    and one pass of self-attention routing. Defaults: the paper's MNIST model (161k parameters
    without the decoder)."""

    routing: ClassVar[str | None] = FAMILY.routing
    run_options: ClassVar[tuple[str, ...]] = ("reconstruction",)

    family: str = "efficient"
    in_size: int = bounded(28, lo=MIN_SIZE, hi=MAX_SIZE)
    in_channels: int = bounded(1, lo=1, hi=3)
    num_classes: int = bounded(10, lo=2, hi=100)
    # Conv 5x5, 3x3, 3x3, 3x3 stride 2, each ReLU then BatchNorm: 28 -> 24 -> 22 -> 20 -> 9
    conv_channels: tuple[int, int, int, int] = bounded((32, 64, 64, 128), lo=1, hi=1024)
    primary_caps: int = bounded(16, lo=1, hi=1024)  # the depthwise conv's conv_channels[-1] outputs as 16 capsules of 8
    primary_dim: int = bounded(8, lo=1, hi=64)
    digit_dim: int = bounded(16, lo=1, hi=64)
    reconstruction: bool = True  # Sabour et al.'s decoder + 0.392 * mean squared error
    decoder_hidden: tuple[int, int] = bounded((512, 1024), lo=1, hi=8192)

    @property
    def decodes(self) -> bool:
        return self.reconstruction

    @property
    def primary_grid(self) -> int:
        """Side of the last conv's map; the depthwise primary-capsule kernel spans all of it (9 at 28x28)."""
        return (self.in_size - 4 - 2 - 2 - 3) // 2 + 1

    @property
    def problem(self) -> str | None:
        """Why no model can be built from this config, where its fields alone say so."""
        if self.primary_grid >= 1:
            return None
        return t("Its four convolutions leave nothing of {size}x{size} inputs.", size=self.in_size)


PRESETS = {"efficient-capsnet": EfficientCapsConfig()}
