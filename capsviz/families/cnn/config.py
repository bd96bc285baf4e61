"""The baseline CNNs' config and presets; every field declares what a checkpoint file may hold for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from capsviz.bounds import MAX_SIZE, MIN_SIZE, bounded
from capsviz.families.cnn import FAMILY


@dataclass(frozen=True)
class CNNConfig:
    """The baseline CNNs the papers compare with; `kind` picks which one."""

    routing: ClassVar[str | None] = FAMILY.routing
    run_options: ClassVar[tuple[str, ...]] = ()
    decodes: ClassVar[bool] = False

    family: str = "cnn"
    kind: str = bounded("mnist", choices=("mnist", "multimnist", "smallnorb"))
    in_size: int = bounded(28, lo=MIN_SIZE, hi=MAX_SIZE)
    in_channels: int = bounded(1, lo=1, hi=3)
    num_classes: int = bounded(10, lo=2, hi=100)
    dropout: float = bounded(0.5, lo=0, hi=0.99)


PRESETS = {
    "cnn-mnist": CNNConfig(),
    "cnn-multimnist": CNNConfig(kind="multimnist", in_size=36),
    "cnn-smallnorb": CNNConfig(kind="smallnorb", in_size=32, num_classes=5),
    # CPU-friendly MNIST baseline for the robustness page: the smallNORB paper's CNN at 28x28 (3.3M).
    "cnn-small": CNNConfig(kind="smallnorb"),
}
