"""Efficient-CapsNet (Mazzia, Salvetti, Chiaberge 2021): a BatchNorm conv stack -> depthwise
primary capsules -> self-attention routing to the class capsules -> Sabour et al.'s decoder."""

from __future__ import annotations

import torch
import torch.nn as nn

from capsviz.entries import Layout
from capsviz.families.efficient_capsnet.config import EfficientCapsConfig
from capsviz.i18n import N_
from capsviz.losses import reconstruction_loss
from capsviz.models import ModelOutput
from capsviz.models.heads import ClassCapsules, Decoder
from capsviz.routing import efficient_squash, route

DYNAMIC_ITERATIONS = 3  # dynamic routing's iterations when the model is run with it and none are asked for
MSE_WEIGHT = 0.392  # the paper's weight on the mean squared reconstruction error (= 0.0005 x 784 pixels)


class EfficientCapsNet(ClassCapsules, nn.Module):
    def __init__(self, *, config: EfficientCapsConfig):
        super().__init__()
        self.config = cfg = config
        if cfg.primary_caps * cfg.primary_dim != cfg.conv_channels[-1]:
            raise ValueError(
                f"{cfg.primary_caps} primary capsules of {cfg.primary_dim} need {cfg.primary_caps * cfg.primary_dim} "
                f"channels from the last conv, which has {cfg.conv_channels[-1]}"
            )
        layers, c_in = [], cfg.in_channels
        for c_out, k, s in zip(cfg.conv_channels, (5, 3, 3, 3), (1, 1, 1, 2), strict=True):
            conv = nn.Conv2d(c_in, c_out, k, stride=s)
            nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")  # he_normal and zero bias, as the official code
            nn.init.zeros_(conv.bias)
            layers += [conv, nn.ReLU(inplace=True), nn.BatchNorm2d(c_out)]  # ReLU before BatchNorm, as the official code
            c_in = c_out
        self.convs = nn.Sequential(*layers)
        g = cfg.primary_grid
        # depthwise: one g x g filter per channel, so the whole map becomes 1 x 1 x C
        self.primary = nn.Conv2d(c_in, c_in, g, groups=c_in)
        I, J, K, D = cfg.primary_caps, cfg.num_classes, cfg.primary_dim, cfg.digit_dim
        self.num_primary = I
        # He normal over each W_ij's own fan-in K. (Keras's he_normal in the official code counts
        # J * I * K as the fan-in, std 0.04, which starts every |s| near 0.)
        self.W = nn.Parameter((2 / K) ** 0.5 * torch.randn(J, I, K, D))  # (J, I, K, D): W_ij maps u_i to u_hat_j|i
        self.b = nn.Parameter(torch.zeros(J, I))  # (J, I) the learned log prior of self-attention routing
        self.decoder = (
            Decoder(num_classes=J, dim=D, hidden=cfg.decoder_hidden, out_size=cfg.in_size, channels=cfg.in_channels)
            if cfg.reconstruction
            else None
        )

    def primary_capsules(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, C, S, S) -> primary capsules u (B, I, K), squashed by Efficient-CapsNet's squash."""
        h = self.primary(self.convs(x))  # (B, C, 1, 1)
        return efficient_squash(h.view(h.shape[0], self.num_primary, self.config.primary_dim))  # (B, I, K)

    def predictions(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, C, S, S) -> u_hat, every primary capsule's prediction for every class capsule, (B, J, I, D)."""
        return torch.einsum("jikd,bik->bjid", self.W, self.primary_capsules(x))  # (B, J, I, D): u_hat_j|i = u_i W_ij

    def forward(
        self,
        x: torch.Tensor,
        y: torch.Tensor | None = None,
        *,
        record: bool = False,
        reconstruct: bool = True,
        routing: str | None = None,
        iterations: int | None = None,
    ) -> ModelOutput:
        """x (B, C, S, S) in [0, 1]; y: the label(s) that mask the decoder (`ClassCapsules._outputs`).
        `routing` (one of capsviz.routing.ROUTINGS) runs the model with another routing for this
        call only, `iterations` being dynamic routing's; the model is not changed. The learned
        prior b belongs to self-attention and is used by it alone; the other one-pass routings
        squash with this model's squash too, dynamic routing with Eq. 1 (its agreements need it)."""
        routed = self.route(self.predictions(x), routing=routing, iterations=iterations, record=record)
        out = self._outputs(routed.v, y, reconstruct)
        if record:
            out.trace = routed
            out.layer_traces["digitcaps"] = routed
        return out

    def route(self, u_hat: torch.Tensor, *, routing: str | None = None, iterations: int | None = None, record: bool = False):
        """Predictions u_hat (B, J, I, D) routed by self-attention with the learned prior, or by
        `routing` (and `iterations`, dynamic routing's) for this call only."""
        name = "self-attention" if routing is None else routing
        T = DYNAMIC_ITERATIONS if iterations is None else iterations
        return route(name, u_hat, iterations=T, prior=self.b, squash=efficient_squash, record=record)

    def reconstruction_loss(self, reconstruction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """0.392 x the mean squared pixel error."""
        return reconstruction_loss(reconstruction, target, scale=MSE_WEIGHT / reconstruction[0].numel())

    def trace(self, x: torch.Tensor, iterations: int | None = None, routing: str | None = None) -> ModelOutput:
        """The output with the class capsules' routing recorded (`trace`), no reconstruction."""
        return self(x, record=True, reconstruct=False, routing=routing, iterations=iterations)


def primary_layout(cfg: EfficientCapsConfig) -> Layout:
    """Where its primary capsules sit (its registry entry's `layout`): nowhere in particular, the
    depthwise kernel spans the whole of the last conv's map."""
    return Layout(0, cfg.primary_dim, about=N_("This model has no grid of positions: its primary capsules see the whole image."))


def training_votes(model: EfficientCapsNet, config: EfficientCapsConfig, x: torch.Tensor, y: torch.Tensor) -> int:
    """What a training step keeps for its backward pass (capsviz.estimate, on the meta device): its
    whole loss is run; its votes u_hat (J, I, D) per image, returned."""
    model.loss(model(x, y), y, x)
    return model.num_primary * config.num_classes * config.digit_dim
