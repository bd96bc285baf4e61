"""Matrix capsules with EM routing (Hinton et al. 2018, Fig. 1):
Conv1 -> PrimaryCaps -> ConvCaps1 (K=3, s=2) -> ConvCaps2 (K=3, s=1) -> class capsules."""

from __future__ import annotations

import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

from capsviz.families.matrix_capsnet.config import MatrixCapsConfig
from capsviz.kernels.slices import em_slices, in_chunks
from capsviz.layers import ClassCaps, ConvCaps, PrimaryMatrixCaps, conv_out, coordinate_grid, receptive_centres
from capsviz.losses import spread_loss, spread_margin
from capsviz.models import ModelOutput

# (kernel, stride) of Conv1, PrimaryCaps, ConvCaps1, ConvCaps2: the receptive-field geometry
GEOMETRY = [(5, 2), (1, 1), (3, 2), (3, 1)]


class MatrixCapsNet(nn.Module):
    def __init__(self, *, config: MatrixCapsConfig):
        super().__init__()
        self.config = cfg = config
        n = cfg.in_size
        grids = []
        for k, s in GEOMETRY:
            n = conv_out(n, k, s)
            grids.append(n)
        self.final_grid = n
        g1, g2 = grids[2], grids[3]  # ConvCaps1's and ConvCaps2's output grids
        self.votes_per_image = 16 * (g1 * g1 * 9 * cfg.B * cfg.C + g2 * g2 * 9 * cfg.C * cfg.D + g2 * g2 * cfg.D * cfg.num_classes)
        it, lam = cfg.routing_iterations, cfg.final_lambda
        self.conv1 = nn.Conv2d(cfg.in_channels, cfg.A, 5, stride=2)
        self.primary = PrimaryMatrixCaps(in_channels=cfg.A, types=cfg.B)
        self.convcaps1 = ConvCaps(in_types=cfg.B, out_types=cfg.C, kernel=3, stride=2, iterations=it, final_lambda=lam)
        self.convcaps2 = ConvCaps(in_types=cfg.C, out_types=cfg.D, kernel=3, stride=1, iterations=it, final_lambda=lam)
        coords = coordinate_grid(receptive_centres(cfg.in_size, GEOMETRY)) if cfg.coord_add else None
        self.classcaps = ClassCaps(in_types=cfg.D, num_classes=cfg.num_classes, iterations=it, final_lambda=lam, coords=coords)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor | None = None, *, iterations: int | None = None, record: bool = False
    ) -> ModelOutput:
        """x (B, C, S, S). `iterations` overrides the EM iterations of every routed layer."""
        # passed down, never stored on the layers: the app shares one cached model between sessions
        h = F.relu(self.conv1(x))  # (B, A, H, W)
        if record:
            pose, a = self.primary(h)  # (B, H, W, B_t, 16), (B, H, W, B_t)
            pose, a, r1 = self.convcaps1(pose, a, record=True, iterations=iterations)
            pose, a, r2 = self.convcaps2(pose, a, record=True, iterations=iterations)
            res = self.classcaps(pose, a, record=True, iterations=iterations)
            out = ModelOutput(scores=res.a, capsules=res.mu, trace=res)
            out.layer_traces = {"convcaps1": r1, "convcaps2": r2, "class": res}
            return out
        chunk, keep = em_slices(h, self.votes_per_image)
        capsules = functools.partial(self._capsules, iterations=iterations)
        a, mu = in_chunks(capsules, h, chunk=chunk, keep=keep)
        return ModelOutput(scores=a, capsules=mu)

    def loss(
        self, out: ModelOutput, y: torch.Tensor, target=None, *, progress: float = 0.0, margin_start: float = 0.2, **_
    ) -> torch.Tensor:
        """The paper's spread loss (Eq. 3), its margin rising from `margin_start` to 0.9 as
        training `progress`es from 0 to 1 (capsviz.losses.spread_margin)."""
        return spread_loss(out.scores.float(), y, spread_margin(progress, start=margin_start))

    def classify(self, x: torch.Tensor) -> ModelOutput:
        return self(x)

    def trace(self, x: torch.Tensor, iterations: int | None = None) -> ModelOutput:
        """What the routing pages read: the output with every EM iteration recorded, the class
        layer's as `trace` and every routed layer's in `layer_traces` (EMRoutingResults)."""
        return self(x, iterations=iterations, record=True)

    def _capsules(self, h: torch.Tensor, iterations: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        pose, a = self.primary(h)
        pose, a, _ = self.convcaps1(pose, a, iterations=iterations)
        pose, a, _ = self.convcaps2(pose, a, iterations=iterations)
        res = self.classcaps(pose, a, iterations=iterations)
        return res.a, res.mu


def training_votes(model: MatrixCapsNet, config: MatrixCapsConfig, x: torch.Tensor, y: torch.Tensor) -> int:
    """What a training step keeps before EM routing (capsviz.estimate, on the meta device): Conv1
    and the primary capsules are run; the votes of every routed layer per image, returned."""
    model.primary(torch.relu(model.conv1(x)))
    return model.votes_per_image
