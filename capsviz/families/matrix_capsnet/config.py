"""Matrix capsules' config and presets; every field declares what a checkpoint file may hold for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from capsviz.bounds import MAX_ITERATIONS, MAX_SIZE, MIN_SIZE, bounded
from capsviz.families.matrix_capsnet import FAMILY


@dataclass(frozen=True)
class MatrixCapsConfig:
    """Matrix capsules with EM routing (Hinton et al. 2018, Fig. 1). Defaults: the paper's model."""

    routing: ClassVar[str | None] = FAMILY.routing
    run_options: ClassVar[tuple[str, ...]] = ("final_lambda",)
    decodes: ClassVar[bool] = False

    family: str = "matrix"
    in_size: int = bounded(32, lo=MIN_SIZE, hi=MAX_SIZE)  # 32 smallNORB crops, 28 MNIST
    in_channels: int = bounded(1, lo=1, hi=3)
    num_classes: int = bounded(5, lo=2, hi=100)
    A: int = bounded(32, lo=1, hi=512)  # Conv1 channels
    B: int = bounded(32, lo=1, hi=128)  # primary capsule types
    C: int = bounded(32, lo=1, hi=128)  # ConvCaps1 types
    D: int = bounded(32, lo=1, hi=128)  # ConvCaps2 types
    routing_iterations: int = bounded(3, lo=1, hi=MAX_ITERATIONS)
    coord_add: bool = True
    # inverse temperature at the last iteration; larger saturates the logistic (see em_routing)
    final_lambda: float = bounded(0.3, lo=1e-6, hi=100)


PRESETS = {
    "matrix": MatrixCapsConfig(),
    # 2 EM iterations, not the paper's 3: a small model learns faster with them and each step is cheaper (RESULTS.md).
    "matrix-small": MatrixCapsConfig(A=64, B=8, C=16, D=16, routing_iterations=2),
}
