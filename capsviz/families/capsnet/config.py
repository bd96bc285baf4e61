"""Dynamic-routing CapsNet's config, its presets, and how a network written elsewhere may compute.

Every field declares what a checkpoint file may hold for it (capsviz.bounds.bounded); the
checkpoint schema is derived from these declarations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from capsviz.bounds import MAX_ITERATIONS, MAX_SIZE, MIN_SIZE, bounded
from capsviz.families.capsnet import FAMILY
from capsviz.registry import vector_routings

# CapsNetConfig's computation options at the paper's values
PAPER_COMPUTATION = {
    "primary_grouping": "paper",
    "primary_squash": "capsule",
    "squash": "sabour",
    "class_squash": "capsule",
    "routing_softmax": "classes",
    "routing_logits": "image",
    "routing_batch": 0,
    "routing_prior": False,
    "input_mean": 0.0,
    "input_std": 1.0,
}
# paper: capsule i = (row, col, type) holds channels t*K .. t*K + K-1 at one position;
# view: the NCHW conv output's values in memory order, viewed (B, -1, K), as `view(B, -1, 8)` of
#   one conv, or of K convs stacked on dim 1, gives: a capsule is K neighbours of one map
PRIMARY_GROUPINGS = ("paper", "view")
# capsule: each capsule's K values (the paper); map: each of the K values over all I capsules
PRIMARY_SQUASH_AXES = ("capsule", "map")
# capsule: each class capsule's D values (the paper); classes: each of the D values over the J classes
# (squash(s, dim=1) of (B, J, D)); all: the whole (J, D) map of an image at once; value: each value
# on its own (a squash summing over an axis of size 1, as squash(s.unsqueeze(-1)) of (B, J, D) gives)
CLASS_SQUASH_AXES = ("capsule", "classes", "all", "value")
SQUASH_FORMS = ("sabour", "efficient")  # Eq. 1 of Sabour et al.; Mazzia et al.'s (1 - e^-|s|) s/|s|
# Dynamic routing's options (capsviz.routing.dynamic_routing_options): what the couplings sum to 1
# over, and whether the routing logits are each image's own, averaged over the images routed together
# or summed over them (`b += a.sum(0)`, as some public code writes it)
ROUTING_SOFTMAX = ("classes", "inputs")
ROUTING_LOGITS = ("image", "batch", "batch-sum")


@dataclass(frozen=True)
class CapsNetConfig:
    """Dynamic-routing CapsNet (Sabour et al. 2017, Fig. 1). Defaults are the paper's MNIST model."""

    # What the family offers beyond its fields: its routing (its registry entry says which)
    # and the TrainRun fields that override its config (capsviz.train.model_config)
    routing: ClassVar[str | None] = FAMILY.routing
    run_options: ClassVar[tuple[str, ...]] = ("reconstruction", "couplings")

    family: str = "capsnet"
    in_size: int = bounded(28, lo=MIN_SIZE, hi=MAX_SIZE)  # 28 MNIST, 36 MultiMNIST, 40 expanded MNIST / affNIST
    in_channels: int = bounded(1, lo=1, hi=3)
    num_classes: int = bounded(10, lo=2, hi=100)
    conv1_channels: int = bounded(256, lo=1, hi=1024)
    conv1_kernel: int = bounded(9, lo=1, hi=15)
    primary_types: int = bounded(32, lo=1, hi=128)  # capsule channels in PrimaryCaps
    primary_dim: int = bounded(8, lo=1, hi=64)
    primary_kernel: int = bounded(9, lo=1, hi=15)
    digit_dim: int = bounded(16, lo=1, hi=64)
    routing_iterations: int = bounded(3, lo=1, hi=MAX_ITERATIONS)  # the paper's recommendation (Appendix A)
    # how DigitCaps' couplings are made in training and by default (capsviz.routing.route):
    # the paper's dynamic routing, or a baseline the routing lab compares it with (any registered vector-capsule routing)
    couplings: str = bounded("dynamic", choices=vector_routings)
    reconstruction: bool = True  # decoder + 0.0005 * sum-of-squares loss
    decoder_hidden: tuple[int, int] = bounded((512, 1024), lo=1, hi=8192)
    # How a network written elsewhere computes (capsviz import); the defaults are the paper's, and
    # capsviz's own models never change them. Every non-default runs the plain reference path.
    # Absent in older files: the paper's.
    primary_grouping: str = bounded("paper", choices=PRIMARY_GROUPINGS)  # which conv outputs make one primary capsule
    primary_squash: str = bounded("capsule", choices=PRIMARY_SQUASH_AXES)  # what each squash of the primary capsules normalises
    squash: str = bounded("sabour", choices=SQUASH_FORMS)  # the squash of primary and class capsules
    class_squash: str = bounded("capsule", choices=CLASS_SQUASH_AXES)  # what each squash of the class capsules normalises
    routing_softmax: str = bounded("classes", choices=ROUTING_SOFTMAX)  # what the couplings sum to 1 over
    routing_logits: str = bounded("image", choices=ROUTING_LOGITS)  # per image, or averaged (or summed) over the images routed together
    routing_batch: int = bounded(0, lo=0, hi=1 << 16)  # with batch-averaged logits: images routed together (0: however many are passed)
    routing_prior: bool = False  # a learned routing prior b (I, J), the parameter `routing_prior`
    input_mean: float = bounded(0.0, lo=-1e3, hi=1e3)  # the network reads (x - input_mean) / input_std of images x in [0, 1]
    input_std: float = bounded(1.0, lo=1e-6, hi=1e3)

    @property
    def decodes(self) -> bool:
        """Whether the model redraws its input from the class capsules (Fig. 2)."""
        return self.reconstruction

    @property
    def paper_computation(self) -> bool:
        """Whether it computes as Sabour et al. (and capsviz's own models) do: every option of a
        network written elsewhere at its default."""
        return all(getattr(self, k) == v for k, v in PAPER_COMPUTATION.items())

    @property
    def primary_grid(self) -> int:
        return (self.in_size - self.conv1_kernel + 1 - self.primary_kernel) // 2 + 1

    @property
    def problem(self) -> str | None:
        """Why no model can be built from this config, where its fields alone say so."""
        if self.primary_grid < 1:
            return f"kernels of {self.conv1_kernel} and {self.primary_kernel} leave no PrimaryCaps grid on {self.in_size}x{self.in_size} inputs"
        return None


PRESETS = {
    "capsnet": CapsNetConfig(),
    # CPU-friendly: 64 Conv1 channels and 8 primary types cut the dominant PrimaryCaps conv ~16x.
    "capsnet-small": CapsNetConfig(conv1_channels=64, primary_types=8),
    "capsnet-multimnist": CapsNetConfig(in_size=36),
    "capsnet-affine": CapsNetConfig(in_size=40),
}
