"""Dynamic-routing CapsNet (Sabour et al. 2017): Conv1 -> PrimaryCaps -> DigitCaps -> decoder."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from capsviz.entries import Layout
from capsviz.families.capsnet.config import PAPER_COMPUTATION, CapsNetConfig
from capsviz.i18n import t
from capsviz.kernels import policy
from capsviz.kernels.conv import conv2d_nhwc
from capsviz.kernels.slices import dynamic_slices, in_chunks
from capsviz.layers import DigitCaps, PrimaryCaps
from capsviz.models import ModelOutput
from capsviz.models.heads import ClassCapsules, Decoder
from capsviz.routing import SQUASHES, DynamicOptions, class_squash, route


def primary_index(grouping: str, types: int, dim: int, grid: int) -> torch.Tensor:
    """Which PrimaryCaps conv outputs make each primary capsule, as one index map (I, K) into the
    NCHW output (T*K, G, G) flattened: capsule i's dimension d is the value at index[i, d].

    paper: i = (row * G + col) * T + type holds channels t*K .. t*K + K-1 at (row, col).
    view: i*K .. i*K + K-1, the memory order, as `view(B, -1, K)` of the NCHW output gives (of
    one conv, or of K convs stacked on dim 1: their channels in order); a capsule is then K
    neighbours along one map, some straddling two channels."""
    if grouping == "view":
        return torch.arange(grid * grid * types * dim).view(-1, dim)  # (I, K)
    if grouping != "paper":
        raise ValueError(f"unknown primary grouping {grouping!r}")
    channel = torch.arange(types * dim).view(1, 1, types, dim)  # (1, 1, T, K): channel t*K + d
    pos = torch.arange(grid * grid).view(grid, grid, 1, 1)  # (G, G, 1, 1): row * G + col
    return (channel * grid * grid + pos).reshape(-1, dim)  # (I, K), i = (row, col, type)


def primary_places(grouping: str, types: int, dim: int, grid: int) -> np.ndarray:
    """(grid * grid, I): the share of each position's primary-capsule values that capsule i holds,
    from the grouping's index map (`primary_index`): a row sums to 1. For the paper's grouping each
    position holds `types` whole capsules (1/types each); for the view grouping a capsule is spread
    over the positions of the values it is built from."""
    index = primary_index(grouping, types, dim, grid).numpy()  # (I, K) into (T*K, G, G) flattened
    G2, I = grid * grid, index.shape[0]
    counts = np.zeros((G2, I))
    np.add.at(counts, (index % G2, np.repeat(np.arange(I)[:, None], index.shape[1], 1)), 1.0)
    return counts / counts.sum(1, keepdims=True)


def primary_layout(cfg: CapsNetConfig) -> Layout:
    """Where a CapsNet's primary capsules sit (its registry entry's `layout`): on the PrimaryCaps
    grid, grouped as its config says."""
    places = primary_places(cfg.primary_grouping, cfg.primary_types, cfg.primary_dim, cfg.primary_grid)
    return Layout(cfg.primary_grid, cfg.primary_dim, cfg.primary_types, cfg.primary_grouping, places)


def computation_words(cfg) -> list[str]:
    """What a CapsNet computes differently from Sabour et al., one plain sentence per option (an
    empty list for the paper's computation, which capsviz's own models always have). The zoo card
    and the routing page show these."""
    if getattr(cfg, "family", None) != "capsnet" or cfg.paper_computation:
        return []
    words = []
    if cfg.input_mean != 0.0 or cfg.input_std != 1.0:
        words.append(
            t("reads its images normalised: (x - {mean}) / {std}, x in [0, 1]", mean=f"{cfg.input_mean:g}", std=f"{cfg.input_std:g}")
        )
    if cfg.primary_grouping == "view":
        words.append(
            t(
                "a primary capsule is {d} neighbouring values of one conv map (view(B, -1, {d}) of the NCHW output), "
                "not one position's channels",
                d=cfg.primary_dim,
            )
        )
    if cfg.primary_squash == "map":
        words.append(t("primary capsules squashed over each of their {d} values' whole map, not capsule by capsule", d=cfg.primary_dim))
    if cfg.squash == "efficient":
        words.append(t("squash (1 - e^-|s|) s/|s| (Efficient-CapsNet's), not Eq. 1"))
    if cfg.class_squash == "classes":
        words.append(t("class capsules squashed over the classes (each of their values across the classes), not capsule by capsule"))
    elif cfg.class_squash == "all":
        words.append(t("class capsules squashed all together (an image's whole map of class capsules at once), not capsule by capsule"))
    elif cfg.class_squash == "value":
        words.append(t("class capsules squashed value by value (each of their values on its own), not capsule by capsule"))
    if cfg.routing_softmax == "inputs":
        words.append(t("couplings sum to 1 over the input capsules for each class (softmax over inputs), not over the classes"))
    if cfg.routing_logits != "image":
        after = t("an image's class capsules depend on the other images in its batch (one image on its own is routed alone)")
        if cfg.routing_batch:
            said = (
                t("routing logits averaged over each {n} images: {after}", n=cfg.routing_batch, after=after)
                if cfg.routing_logits == "batch"
                else t("routing logits summed over each {n} images: {after}", n=cfg.routing_batch, after=after)
            )
        else:
            said = (
                t("routing logits averaged over all images routed together: {after}", after=after)
                if cfg.routing_logits == "batch"
                else t("routing logits summed over all images routed together: {after}", after=after)
            )
        words.append(said)
    if cfg.routing_prior:
        words.append(t("routing starts from a learned prior b (input capsules x classes), not from 0"))
    return words


class CapsNet(ClassCapsules, nn.Module):
    def __init__(self, *, config: CapsNetConfig):
        super().__init__()
        self.config = cfg = config
        self.conv1 = nn.Conv2d(cfg.in_channels, cfg.conv1_channels, cfg.conv1_kernel)
        self.primary = PrimaryCaps(in_channels=cfg.conv1_channels, types=cfg.primary_types, dim=cfg.primary_dim, kernel=cfg.primary_kernel)
        self.num_primary = cfg.primary_grid**2 * cfg.primary_types
        self.digits = DigitCaps(num_in=self.num_primary, num_out=cfg.num_classes, dim_in=cfg.primary_dim, dim_out=cfg.digit_dim)
        if cfg.routing_prior:  # a learned prior of the routing logits, (I, J)
            self.routing_prior = nn.Parameter(torch.zeros(self.num_primary, cfg.num_classes))
        self.decoder = (
            Decoder(
                num_classes=cfg.num_classes, dim=cfg.digit_dim, hidden=cfg.decoder_hidden, out_size=cfg.in_size, channels=cfg.in_channels
            )
            if cfg.reconstruction
            else None
        )

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, C, S, S) -> Conv1's ReLU output, NHWC (B, S - 8, S - 8, 256): what PrimaryCaps reads."""
        cfg = self.config
        if cfg.input_mean != 0.0 or cfg.input_std != 1.0:
            x = (x - cfg.input_mean) / cfg.input_std
        x_nhwc = x.permute(0, 2, 3, 1)  # (B, S, S, C)
        path = policy.conv_path(x_nhwc, self.conv1.weight, 1)
        if path:  # the same convolution as one GEMM (capsviz.kernels)
            h = conv2d_nhwc(x_nhwc, self.conv1.weight, self.conv1.bias, 1, path)  # (B, S - 8, S - 8, 256)
        else:
            h = self.conv1(x.contiguous(memory_format=torch.channels_last)).permute(0, 2, 3, 1)  # (B, S - 8, S - 8, 256)
        # in place: h is Conv1's fresh output, and a second buffer of its size (105 MB at batch 256)
        # would cost more in page faults than the ReLU itself
        return F.relu(h, inplace=True)

    def primary_capsules(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, C, S, S) -> PrimaryCaps outputs u (B, I, 8), I = grid * grid * types. Grouped and
        squashed as the config says (`primary_index`); any option but the paper's runs the plain
        convolution, gathers the capsules by the index map and squashes them."""
        cfg = self.config
        if (cfg.primary_grouping, cfg.primary_squash, cfg.squash) == ("paper", "capsule", "sabour"):
            return self.primary(self.features(x))
        return self.group_primary(self.primary.conv(self.features(x).permute(0, 3, 1, 2)))

    def group_primary(self, y: torch.Tensor) -> torch.Tensor:
        """PrimaryCaps' conv output y (B, T*K, G, G) -> the squashed primary capsules u (B, I, K),
        grouped and squashed as the config says (the reference path of `primary_capsules`)."""
        cfg = self.config
        index = primary_index(cfg.primary_grouping, cfg.primary_types, cfg.primary_dim, cfg.primary_grid).to(y.device)
        u = y.flatten(1)[:, index].float()  # (B, I, K)
        return SQUASHES[cfg.squash](u, dim=1 if cfg.primary_squash == "map" else -1)

    def routing_slices(self, u: torch.Tensor) -> tuple[int, int]:
        """For primary capsules u (B, I, 8) on the CPU: images per routing slice, and how many
        images keep their activations in training (`in_chunks`' chunk and keep)."""
        per_image = u.shape[1] * self.config.num_classes * self.config.digit_dim * u.element_size()  # bytes of u_hat
        return dynamic_slices(per_image)

    def predictions(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, C, S, S) -> u_hat, every primary capsule's prediction for every digit capsule, (B, J, I, D)."""
        return self.digits(self.primary_capsules(x))

    def forward(
        self,
        x: torch.Tensor,
        y: torch.Tensor | None = None,
        *,
        iterations: int | None = None,
        record: bool = False,
        reconstruct: bool = True,
        routing: str | None = None,
    ) -> ModelOutput:
        """x (B, C, S, S) in [0, 1]; y: the label(s) that mask the decoder (`ClassCapsules._outputs`).
        `iterations` overrides the configured routing iterations, and `routing` (one of
        capsviz.routing.ROUTINGS) the configured couplings, for this call only: the weights are
        the same and the model is not changed (the app shares one cached model between sessions).
        Every routing squashes with Eq. 1, so another routing changes the couplings alone."""
        u = self.primary_capsules(x)
        if record:
            routed = self.route(self.digits(u), routing=routing, iterations=iterations, record=True)
            v = routed.v  # (B, J, D)
        elif self.config.routing_logits != "image":  # the batch is routed together, as the original routes it
            v = self.route(self.digits(u), routing=routing, iterations=iterations).v
        else:
            chunk, keep = self.routing_slices(u)
            v = in_chunks(lambda u: self.route(self.digits(u), routing=routing, iterations=iterations).v, u, chunk=chunk, keep=keep)
        out = self._outputs(v, y, reconstruct)
        if record:
            out.trace = routed
            out.layer_traces["digitcaps"] = routed
        return out

    def route(self, u_hat: torch.Tensor, *, routing: str | None = None, iterations: int | None = None, record: bool = False):
        """DigitCaps' predictions u_hat (B, J, I, D) routed as this model routes them (its configured
        couplings and iterations), or by `routing` and `iterations` for this call only."""
        T = self.config.routing_iterations if iterations is None else iterations  # 0 is refused by the routing, not replaced
        name = self.config.couplings if routing is None else routing
        own = class_squash(self.config.squash, self.config.class_squash)
        return route(name, u_hat, iterations=T, squash=own, record=record, dynamic=self.dynamic_options())

    def dynamic_options(self) -> DynamicOptions | None:
        """Its dynamic routing's options (capsviz.routing.DynamicOptions); None for the paper's."""
        cfg = self.config
        keys = ("routing_softmax", "routing_logits", "routing_prior", "squash", "class_squash")
        if all(getattr(cfg, k) == PAPER_COMPUTATION[k] for k in keys):
            return None
        prior = self.routing_prior if cfg.routing_prior else None
        return DynamicOptions(
            softmax=cfg.routing_softmax,
            logits=cfg.routing_logits,
            batch=cfg.routing_batch,
            prior=prior,
            squash=cfg.squash,
            squash_axis=cfg.class_squash,
        )

    def trace(self, x: torch.Tensor, iterations: int | None = None, routing: str | None = None) -> ModelOutput:
        """What the routing pages read: the output with DigitCaps' routing recorded at every
        iteration (`trace`, a RoutingResult), no reconstruction."""
        return self(x, iterations=iterations, record=True, reconstruct=False, routing=routing)


def training_votes(model: CapsNet, config: CapsNetConfig, x: torch.Tensor, y: torch.Tensor) -> int:
    """What a training step keeps of a CapsNet for its backward pass (capsviz.estimate, on the meta
    device): the primary capsules and the decoder are run; the routing's convergence checks read
    values, so its votes u_hat (J, I, D) per image are counted from their shapes, returned."""
    u = model.primary_capsules(x)  # (B, I, K)
    if model.decoder is not None:
        B = x.shape[0]
        model.decoder(
            torch.zeros(B, config.num_classes, config.digit_dim, device="meta"), torch.zeros(B, config.num_classes, device="meta")
        )
    return u.shape[1] * config.num_classes * config.digit_dim
