"""A CapsNet's weights written elsewhere, read in capsviz's layout: `CapsuleAdapter` reads the
weights of a PyTorch CapsNet and makes it a capsviz `CapsNet`, which every page (tour, explorer,
routing) then opens like one trained here: the same predictions u_hat, routing, class capsules v
and masked decoder, because it *is* one (capsviz.adapter imports it as a checkpoint).

What is read: a plain state dict saved with `torch.save(model.state_dict(), path)` (or a dict
holding one under 'state_dict' or 'model'), through `torch.load(weights_only=True)`, which never
runs code from the file; or a .safetensors file. Anything else is one CapsvizError line.

The layout most public PyTorch CapsNets share (Sabour et al. 2017, Fig. 1) is matched by the
shapes of its tensors and their order, never by their names (every repository names them its
own way):

    Conv1        a conv weight (C1, 1, k, k) and its bias               e.g. (256, 1, 9, 9)
    PrimaryCaps  one conv (T*K, C1, k, k), K convs (T, C1, k, k)        e.g. (256, 256, 9, 9), 8 x (32, 256, 9, 9)
                 or T convs (K, C1, k, k)                                    or 32 x (8, 256, 9, 9)
    DigitCaps    W in any of (I, J, D, K), (1, I, J, D, K),             e.g. (1, 1152, 10, 16, 8)
                 (J, I, K, D), (I, J, K, D), (J, I, D, K)                    or (10, 1152, 8, 16)
    Decoder      three Linear layers J*D -> h1 -> h2 -> H*W (optional)  e.g. 160 -> 512 -> 1024 -> 784
                 or D -> h1 -> h2 -> H*W (fed the longest capsule alone)     or 16 -> 512 -> 1024 -> 784

What the weights cannot say is assumed, and each assumption is listed in `notes`: Conv1 stride 1,
PrimaryCaps stride 2, no padding, ReLU after Conv1, Eq. 1's squash on the primary and class
capsules, dynamic routing with softmax over the classes and 3 iterations, a ReLU-ReLU-sigmoid
decoder fed all class capsules with all but one masked to 0 (or, its first layer reading D
values, the longest capsule alone: the same numbers), and how the primary capsules are
numbered (`primary_order`, `primary_channels`). A network that differs in any of these computes
other numbers than its capsviz twin: compare the two on a batch (`class capsule lengths`, as
tests/test_adapter.py does) before trusting the pictures. Tensors that fit no part are refused,
unless they are all zeros (a routing-logit buffer, an unused bias): those are ignored and noted.

Other layouts: subclass and override `parts()`, returning the same tensors in capsviz's layout
(README, "Your own model").
"""

from __future__ import annotations

import pickle
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from capsviz.errors import CapsvizError, first_line
from capsviz.families.capsnet.config import CapsNetConfig
from capsviz.families.capsnet.model import CapsNet
from capsviz.i18n import N_, sentence, t

# How a PyTorch CapsNet numbers its primary capsules, which no weight shape shows.
# type-major: i = (type, row, col), what viewing the NCHW conv output as (B, T, K, G, G) or
#   concatenating K convs' flattened maps gives; the usual PyTorch layout.
# position-major: i = (row, col, type), what reshaping the NHWC output gives (TensorFlow, Keras,
#   capsviz itself).
# view: not K channels at one position at all: the NCHW output's values in memory order viewed
#   (B, -1, K) (`view(B, -1, 8)` of one conv, or of K convs stacked on dim 1), a capsule being K
#   neighbours along one map (CapsNetConfig.primary_grouping "view").
PRIMARY_ORDERS = ("type-major", "position-major", "view")
# The options of CapsNetConfig a user's code may set (capsviz.families.capsnet.config.PAPER_COMPUTATION has the
# paper's values); the grouping and the prior follow from `primary_order` and the weights
# (routing_prior: False when the code does not start its routing from a prior the weights hold)
COMPUTATION = (
    "primary_squash",
    "squash",
    "class_squash",
    "routing_softmax",
    "routing_logits",
    "routing_batch",
    "input_mean",
    "input_std",
    "routing_prior",
)
# Which conv channel holds dimension d of capsule type t:
# capsule: channel t*K + d (a capsule's K dims are adjacent channels; one conv, the usual view)
# dim: channel d*T + t (K convs of T channels each, one per dimension, stacked in order)
PRIMARY_CHANNELS = ("capsule", "dim")


@dataclass
class Parts:
    """A CapsNet's weights in capsviz's layout (what `CapsNet.state_dict` holds), from any source.

    conv1: weight (C1, 1, k, k), bias (C1,). primary: weight (T*K, C1, k, k) with channel t*K + d,
    bias (T*K,). W: (I, J, D, K) with capsule i = (row * G + col) * T + type (with the "view"
    grouping: the i-th K values of the NCHW output). decoder: three (weight (out, in), bias (out,))
    pairs, or None. notes: what was assumed or ignored. prior: a learned routing prior or None."""

    conv1: tuple[torch.Tensor, torch.Tensor]
    primary: tuple[torch.Tensor, torch.Tensor]
    primary_dim: int
    W: torch.Tensor
    decoder: list[tuple[torch.Tensor, torch.Tensor]] | None
    notes: list[str] = field(default_factory=list)
    prior: torch.Tensor | None = None  # a learned routing prior (I, J), capsules numbered as W's


class CapsuleAdapter:
    """A user's CapsNet weights as a capsviz CapsNet.

    `model()` gives the capsviz `CapsNet` (eval mode) the pages call, whose methods are the
    capsule interface: `predictions(x)` -> u_hat (B, J, I, D), `route(u_hat)` -> routing result
    with v (B, J, D), `forward(x).capsules` -> v and `.scores` -> |v|, `decode(vector, capsule)`
    -> the masked decoder's reconstruction. `config()` is its CapsNetConfig and `notes` what was
    assumed or ignored on the way.

    state: the tensors by name, in the order the file holds them. in_size: the image side the
    network takes (the dataset's). primary_order / primary_channels: see PRIMARY_ORDERS and
    PRIMARY_CHANNELS; `primary_channels` None means "capsule" for one conv or T convs of K
    channels, "dim" for K convs of T channels.
    num_classes: J, which a 3-D W (I, K, J*D) cannot show. computation: how the network computes
    where it differs from the paper, CapsNetConfig's fields named in COMPUTATION (e.g.
    {"routing_softmax": "inputs"}); recorded in the checkpoint and shown by the pages."""

    def __init__(
        self,
        state: dict[str, torch.Tensor],
        *,
        in_size: int = 28,
        primary_order: str = "type-major",
        primary_channels: str | None = None,
        routing_iterations: int = 3,
        num_classes: int = 10,
        computation: dict | None = None,
    ):
        if primary_order not in PRIMARY_ORDERS:
            raise CapsvizError(
                t("primary_order must be one of {choices}; found {found}", choices=", ".join(PRIMARY_ORDERS), found=repr(primary_order))
            )
        if primary_channels not in (None, *PRIMARY_CHANNELS):
            raise CapsvizError(
                t(
                    "primary_channels must be one of {choices}; found {found}",
                    choices=", ".join(PRIMARY_CHANNELS),
                    found=repr(primary_channels),
                )
            )
        unknown = set(computation or {}) - set(COMPUTATION)
        if unknown:
            raise CapsvizError(
                t("computation options {unknown} unknown; they are {known}", unknown=sorted(unknown), known=", ".join(COMPUTATION))
            )
        self.state, self.in_size = dict(state), in_size
        self.primary_order, self.primary_channels = primary_order, primary_channels
        self.routing_iterations, self.num_classes = routing_iterations, num_classes
        self.computation = dict(computation or {})
        self._parts: Parts | None = None
        self._order: torch.Tensor | None = None

    @property
    def notes(self) -> list[str]:
        return self.get_parts().notes

    def get_parts(self) -> Parts:
        """`parts()` once, checked to fit together (a subclass's too)."""
        if self._parts is None:
            _check_values(self.state)
            self._parts = _fitting(self.parts(), self.in_size)
        return self._parts

    def capsule_order(self) -> torch.Tensor:
        """(I,): the twin's primary capsule i is the original network's capsule order[i] (how the
        import renumbered them; the identity for position-major and view numbering)."""
        p = self.get_parts()  # parts() sets the order it numbered by; a subclass's keeps its own numbering
        if self._order is None:
            self._order = torch.arange(p.W.shape[0])
        return self._order

    def config(self) -> CapsNetConfig:
        p = self.get_parts()
        (w1, _), (wp, _) = p.conv1, p.primary
        J, D = p.W.shape[1:3]
        K = p.primary_dim
        return CapsNetConfig(
            in_size=self.in_size,
            in_channels=w1.shape[1],
            num_classes=J,
            conv1_channels=w1.shape[0],
            conv1_kernel=w1.shape[-1],
            primary_types=wp.shape[0] // K,
            primary_dim=K,
            primary_kernel=wp.shape[-1],
            digit_dim=D,
            routing_iterations=self.routing_iterations,
            reconstruction=p.decoder is not None,
            decoder_hidden=(p.decoder[0][0].shape[0], p.decoder[1][0].shape[0]) if p.decoder else (512, 1024),
            primary_grouping="view" if self.primary_order == "view" else "paper",
            routing_prior=p.prior is not None,
            **{k: v for k, v in self.computation.items() if k != "routing_prior"},
        )

    def model(self) -> CapsNet:
        """The capsviz CapsNet holding these weights, in eval mode."""
        p = self.get_parts()
        model = CapsNet(config=self.config())
        tensors = {
            "conv1.weight": p.conv1[0],
            "conv1.bias": p.conv1[1],
            "primary.conv.weight": p.primary[0],
            "primary.conv.bias": p.primary[1],
            "digits.W": p.W,
        }
        for n, (w, b) in enumerate(p.decoder or ()):  # the Linear layers sit at 0, 2, 4 of Decoder.net
            tensors[f"decoder.net.{2 * n}.weight"], tensors[f"decoder.net.{2 * n}.bias"] = w, b
        if p.prior is not None:
            tensors["routing_prior"] = p.prior
        model.load_state_dict({k: v.detach().float().contiguous() for k, v in tensors.items()}, strict=True)
        return model.eval()

    def parts(self) -> Parts:
        """Find Conv1, PrimaryCaps, DigitCaps' W and the decoder by shape and order, and lay them
        out as capsviz's CapsNet holds them. Override for another layout."""
        todo = dict(self.state)
        notes = [sentence("assumed: Conv1 stride 1 and ReLU, PrimaryCaps stride 2, no padding")]
        if "squash" not in self.computation and "primary_squash" not in self.computation:
            notes.append(sentence("assumed: the squash of Sabour et al. (Eq. 1) on primary and class capsules"))
        if not {"routing_softmax", "routing_logits"} & set(self.computation):
            notes.append(sentence("assumed: dynamic routing (softmax over the classes, logits per image, += agreement)"))
        notes.append(sentence("routing iterations: {n} (--iterations)", n=self.routing_iterations))
        conv1 = self._conv1(todo)
        primary, convs = self._primary(todo, conv1[0].shape[0])
        G = (self.in_size - conv1[0].shape[-1] + 1 - primary[0].shape[-1]) // 2 + 1
        if G < 1:
            raise CapsvizError(
                t(
                    "Conv1 and PrimaryCaps kernels leave no capsule grid on {size}x{size} images (pick the right --dataset)",
                    size=self.in_size,
                )
            )
        W, K = self._digit_weights(todo, G, primary[0].shape[0], convs)
        I, J, D, _ = W.shape
        T = I // (G * G)
        # several convs: K of T channels stack one capsule dimension each (channel d*T + t once
        # concatenated); T of K channels are one capsule type each (channel t*K + d)
        channels = self.primary_channels or ("capsule" if convs == 1 or K != convs else "dim")
        if convs > 1:
            notes.append(
                sentence(
                    "PrimaryCaps: {convs} convs of {channels} channels, read as {T} types of {K} dims",
                    convs=convs,
                    channels=primary[0].shape[0] // convs,
                    T=T,
                    K=K,
                )
            )
        prior = self._prior(todo, I, J)
        decoder, winner = self._decoder(todo, J, D)
        if decoder is None:
            notes.append(sentence("no decoder found: the model is imported without reconstructions (the explorer needs one)"))
        elif winner:
            notes.append(
                sentence(
                    "assumed: decoder ReLU, ReLU, sigmoid, fed the longest class capsule's {D} values alone (its first layer is "
                    "repeated for each class: capsviz's decoder reads all {J} masked to 0 but one, which computes the same)",
                    D=D,
                    J=J,
                )
            )
        else:
            notes.append(sentence("assumed: decoder ReLU, ReLU, sigmoid, fed all class capsules with all but one masked to 0"))
        wp, bp = primary
        order = torch.arange(I)
        if self.primary_order == "view":  # the conv's channels (K convs: in order) and W's rows kept as they are
            notes.append(
                sentence("assumed: a primary capsule is {K} neighbouring values of the NCHW conv output (--primary-order view)", K=K)
            )
        else:
            if channels == "dim":  # channel d*T + t -> t*K + d
                wp = wp.view(K, T, *wp.shape[1:]).transpose(0, 1).reshape(wp.shape)
                bp = bp.view(K, T).T.reshape(-1)
            notes.append(
                sentence(
                    "assumed: primary capsules numbered {order} (--primary-order), channels laid out by {channels}",
                    order=self.primary_order,
                    channels=channels,
                )
            )
            if self.primary_order == "type-major":  # the twin's i = (r, c, t) is the original's (t, r, c)
                order = torch.arange(I).view(T, G * G).T.reshape(-1)
        W = W[order]
        if prior is not None and self.computation.get("routing_prior") is False:
            notes.append(
                sentence("ignored: the learned routing prior b {shape} (your code routes from 0: --prior none)", shape=tuple(prior.shape))
            )
            prior = None
        elif prior is not None:
            prior = prior[order]
            notes.append(sentence("a learned routing prior b {shape}: routing starts from it", shape=tuple(prior.shape)))
        for name in list(todo):
            left = todo.pop(name)
            if left.is_floating_point() and bool((left == 0).all()):
                notes.append(sentence("ignored: {name} {shape} (all zeros)", name=name, shape=tuple(left.shape)))
            elif left.numel() == J * D:
                raise CapsvizError(
                    t(
                        "{name} {shape} looks like a DigitCaps bias and is not zero; capsviz's DigitCaps has none "
                        "(s_j = sum_i c_ij u_hat_j|i), so this network cannot be imported as it computes",
                        name=name,
                        shape=tuple(left.shape),
                    )
                )
            else:
                raise CapsvizError(
                    t(
                        "{name} {shape} fits no part of a CapsNet: {why}; capsviz understands Conv1 -> PrimaryCaps -> DigitCaps W "
                        "(-> 3-layer decoder) (README: Your own model)",
                        name=name,
                        shape=tuple(left.shape),
                        why=_might_be(left, I=I, J=J, D=D, K=K),
                    )
                )
        self._order = order
        return Parts(conv1=conv1, primary=(wp, bp), primary_dim=K, W=W, decoder=decoder, notes=notes, prior=prior)

    def _prior(self, todo: dict, I: int, J: int) -> torch.Tensor | None:
        """A learned routing prior: a tensor that is (I, J) once its sizes of 1 are dropped, not all
        zeros (an all-zero logit buffer changes nothing and is ignored with the rest)."""
        found = [k for k, x in todo.items() if x.is_floating_point() and tuple(s for s in x.shape if s != 1) in ((I, J), (J, I))]
        found = [k for k in found if not bool((todo[k] == 0).all())]
        if len(found) > 1:
            raise CapsvizError(
                t("ambiguous routing prior: {names} could each be the learned logits b ({I} x {J})", names=", ".join(found), I=I, J=J)
            )
        if not found:
            return None
        b = todo.pop(found[0]).reshape(-1)
        shape = tuple(s for s in self.state[found[0]].shape if s != 1)
        return b.view(I, J) if shape == (I, J) else b.view(J, I).T.contiguous()

    def _conv1(self, todo: dict) -> tuple[torch.Tensor, torch.Tensor]:
        found = [k for k, x in todo.items() if _is_conv(x) and x.shape[1] in (1, 3)]
        if not found:
            raise CapsvizError(
                t(
                    "no Conv1 found (a conv weight of shape (C1, 1, k, k)); capsviz understands Conv1 -> PrimaryCaps -> "
                    "DigitCaps W (-> 3-layer decoder) (README: Your own model)"
                )
            )
        name = found[0]  # the first by order: a later one with few input channels would be a later layer
        w = todo.pop(name)
        if w.shape[1] != 1:
            raise CapsvizError(
                t("Conv1 {name} takes {n} input channels; capsviz's datasets are greyscale (1 channel)", name=name, n=w.shape[1])
            )
        return w, _bias(todo, name, w.shape[0])

    def _primary(self, todo: dict, c1: int) -> tuple[tuple[torch.Tensor, torch.Tensor], int]:
        """Its weight and bias (several convs concatenated in order), and how many convs."""
        found = sorted((k for k, x in todo.items() if _is_conv(x) and x.shape[1] == c1), key=_natural)
        if not found:
            raise CapsvizError(
                t(
                    "no PrimaryCaps found (a conv weight of shape (T*K, {c1}, k, k), or K of shape (T, {c1}, k, k)); capsviz "
                    "understands Conv1 -> PrimaryCaps -> DigitCaps W (-> 3-layer decoder) (README: Your own model)",
                    c1=c1,
                )
            )
        shapes = {tuple(todo[k].shape) for k in found}
        if len(shapes) > 1:
            raise CapsvizError(
                t("ambiguous PrimaryCaps: convs of different shapes read Conv1's {c1} channels ({names})", c1=c1, names=", ".join(found))
            )
        ws = [todo.pop(k) for k in found]
        bs = [_bias(todo, k, w.shape[0]) for k, w in zip(found, ws, strict=True)]
        return (torch.cat(ws), torch.cat(bs)), len(ws)

    def _digit_weights(self, todo: dict, G: int, channels: int, convs: int) -> tuple[torch.Tensor, int]:
        """W laid out (I, J, D, K), and K: whichever K makes one tensor hold I = G*G*T and K among its
        sizes. Several convs are K convs of T channels or T convs of K channels (the number of convs
        or each one's channels); one conv of T*K channels may be any split."""
        per_conv = channels // convs
        dims = sorted({convs, per_conv}) if convs > 1 else [k for k in range(2, channels + 1) if channels % k == 0]
        J = self.num_classes
        found = []
        for name, tensor in todo.items():
            s = tuple(tensor.shape)
            while len(s) > 3 and s[0] == 1:
                s = s[1:]
            if len(s) == 4:
                found += [(name, K) for K in dims if G * G * channels // K in s[:2] and K in s[2:]]
            elif len(s) == 3:  # (I, K, J*D) and its transposes: J*D the one size left, a multiple of J
                for K in dims:
                    rest = list(s)
                    for size in (G * G * channels // K, K):
                        if size in rest:
                            rest.remove(size)
                    if len(rest) == 1 and rest[0] % J == 0 and rest[0] > J:
                        found.append((name, K))
        if not found:
            left = sorted(todo.items(), key=lambda kv: -kv[1].numel())[:3]  # the largest tensors not placed: W is usually one
            values = {"left": ", ".join(f"{k} {tuple(x.shape)}" for k, x in left) or "-"}
            if convs > 1:  # I = G*G*T for each K the convs allow
                values["I"] = " | ".join(f"G*G*T = {G * G * channels // k} (K = {k})" for k in dims)
                words = N_(
                    "no DigitCaps W found (a tensor with the {I} primary capsules and their K dims among its sizes, 4-D or "
                    "3-D (I, K, J*D), PrimaryCaps being {convs} convs of {channels} channels); the largest left: {left}; "
                    "capsviz understands Conv1 -> PrimaryCaps -> DigitCaps W (-> 3-layer decoder) (README: Your own model)"
                )
                values |= {"convs": convs, "channels": per_conv}
            else:
                values["I"] = f"G*G*T = {G * G * channels // dims[0]}" if len(dims) == 1 else f"G*G*T (T*K = {channels})"
                words = N_(
                    "no DigitCaps W found (a tensor with the {I} primary capsules and their K dims among its sizes, 4-D or "
                    "3-D (I, K, J*D)); the largest left: {left}; capsviz understands Conv1 -> PrimaryCaps -> DigitCaps W "
                    "(-> 3-layer decoder) (README: Your own model)"
                )
            raise CapsvizError(t(words, **values))
        if len(found) > 1:
            raise CapsvizError(t("ambiguous DigitCaps W: {names} could each be it", names=", ".join(f"{n} (K = {k})" for n, k in found)))
        name, K = found[0]
        W = todo.pop(name)
        shape, I = tuple(W.shape), G * G * channels // K
        while W.dim() > 3 and W.shape[0] == 1:
            W = W[0]
        if W.dim() == 3:
            return self._digit_weights_3d(name, W, I, K), K
        a, b, c, d = W.shape
        if (a == I) == (b == I) or (c == K) == (d == K):
            raise CapsvizError(
                t(
                    "DigitCaps W {name} {shape}: cannot tell its layout; understood: (I, J, D, K), (I, J, K, D), (J, I, K, D), "
                    "(J, I, D, K), a leading 1 allowed, with I = {I} primary capsules of K = {K} dims, J != I, D != K",
                    name=name,
                    shape=shape,
                    I=I,
                    K=K,
                )
            )
        if b == I:
            W = W.transpose(0, 1)  # (I, J, ., .)
        if W.shape[2] == K:
            W = W.transpose(2, 3)  # u_hat = u W: the transpose of capsviz's W u
        return W.contiguous(), K

    def _digit_weights_3d(self, name: str, W: torch.Tensor, I: int, K: int) -> torch.Tensor:
        """A W stored (I, K, J*D), (I, J*D, K) or another order of those sizes, J*D class-major (as
        `(u @ W).view(B, I, J, D)` reads it), laid out (I, J, D, K)."""
        shape, J = tuple(W.shape), self.num_classes
        if len(set(shape)) < 3:
            raise CapsvizError(
                t(
                    "DigitCaps W {name} {shape}: cannot tell its layout (two sizes are equal); understood 3-D: (I, K, J*D) or "
                    "(I, J*D, K) with I = {I} primary capsules, K = {K}, J = {J} classes",
                    name=name,
                    shape=shape,
                    I=I,
                    K=K,
                    J=J,
                )
            )
        i, k = shape.index(I), shape.index(K)
        jd = 3 - i - k
        W = W.permute(i, jd, k)  # (I, J*D, K)
        return W.reshape(I, J, shape[jd] // J, K).contiguous()

    def _decoder(self, todo: dict, J: int, D: int) -> tuple[list[tuple[torch.Tensor, torch.Tensor]] | None, bool]:
        """The three Linear layers, the first reading capsviz's masked J*D inputs, and whether the
        original's reads the longest capsule's D values alone (its first weight repeated J times
        here: of the masked input only that capsule's block is not 0, so both compute the same)."""
        linear = [k for k, x in todo.items() if x.dim() == 2]
        if not linear:
            return None, False
        width = J * D
        winner = not any(todo[k].shape[1] == width for k in linear) and any(todo[k].shape[1] == D for k in linear)
        layers, need = [], D if winner else width
        for n in range(3):
            step = [k for k in linear if k in todo and todo[k].shape[1] == need]
            if len(step) > 1:  # h1 == h2 (16 -> 512 -> 512 -> 784): only the last layer draws the picture
                step = [k for k in step if (todo[k].shape[0] == self.in_size**2) == (n == 2)] or step
            if len(step) != 1:
                values = {"need": need, "n": len(layers), "width": width, "D": D, "pixels": self.in_size**2}
                if not step:
                    words = N_(
                        "decoder: expected one Linear layer reading {need} inputs after {n} layer(s), found none; capsviz's "
                        "decoder is three Linear layers {width} (or {D}: the longest capsule alone) -> h1 -> h2 -> {pixels}"
                    )
                else:
                    words = N_(
                        "decoder: expected one Linear layer reading {need} inputs after {n} layer(s), found several: {names}; "
                        "capsviz's decoder is three Linear layers {width} (or {D}: the longest capsule alone) -> h1 -> h2 -> "
                        "{pixels}"
                    )
                    values["names"] = ", ".join(step)
                raise CapsvizError(t(words, **values))
            w = todo.pop(step[0])
            layers.append((w.repeat(1, J) if winner and not layers else w, _bias(todo, step[0], w.shape[0])))  # (h1, J*D)
            need = w.shape[0]
        if need != self.in_size * self.in_size:
            raise CapsvizError(
                t(
                    "decoder draws {need} pixels; {size}x{size} images have {pixels} (pick the right --dataset)",
                    need=need,
                    size=self.in_size,
                    pixels=self.in_size**2,
                )
            )
        return layers, winner


def _fitting(p: Parts, in_size: int) -> Parts:
    """`p` if its tensors make one CapsNet on in_size x in_size images; else the first mismatch, in one line."""
    (w1, b1), (wp, bp), W, K = p.conv1, p.primary, p.W, p.primary_dim
    problems = []
    if w1.dim() != 4 or wp.dim() != 4 or W.dim() != 4:
        problems.append(
            t(
                "the parts found do not make one CapsNet: Conv1 {conv1} and PrimaryCaps {primary} must be conv weights, W {W} (I, J, D, K)",
                conv1=tuple(w1.shape),
                primary=tuple(wp.shape),
                W=tuple(W.shape),
            )
        )
    else:
        G = (in_size - w1.shape[-1] + 1 - wp.shape[-1]) // 2 + 1
        T = wp.shape[0] // K
        if wp.shape[1] != w1.shape[0]:
            problems.append(
                t(
                    "the parts found do not make one CapsNet: PrimaryCaps reads {n} channels; Conv1 gives {c1}",
                    n=wp.shape[1],
                    c1=w1.shape[0],
                )
            )
        if wp.shape[0] % K or W.shape[3] != K:
            problems.append(
                t(
                    "the parts found do not make one CapsNet: PrimaryCaps' {n} channels and W's last size {last} must be T x {K} and {K}",
                    n=wp.shape[0],
                    last=W.shape[3],
                    K=K,
                )
            )
        elif W.shape[0] != G * G * T:
            problems.append(
                t(
                    "the parts found do not make one CapsNet: W holds {n} primary capsules; a {G}x{G} grid of {T} types on "
                    "{size}x{size} images has {I}",
                    n=W.shape[0],
                    G=G,
                    T=T,
                    size=in_size,
                    I=G * G * T,
                )
            )
        if tuple(b1.shape) != (w1.shape[0],) or tuple(bp.shape) != (wp.shape[0],):
            problems.append(t("the parts found do not make one CapsNet: a conv bias does not match its weight's output channels"))
        if p.decoder is not None:
            sizes = [W.shape[1] * W.shape[2]] + [w.shape[0] for w, _ in p.decoder]
            if len(p.decoder) != 3 or any(w.shape[1] != n for (w, _), n in zip(p.decoder, sizes, strict=False)) or sizes[-1] != in_size**2:
                problems.append(
                    t(
                        "the parts found do not make one CapsNet: the decoder must be three Linear layers {width} -> h1 -> h2 -> {pixels}",
                        width=sizes[0],
                        pixels=in_size**2,
                    )
                )
        if p.prior is not None and tuple(p.prior.shape) != tuple(W.shape[:2]):
            problems.append(
                t(
                    "the parts found do not make one CapsNet: the routing prior {shape} must be (I, J) = {IJ}",
                    shape=tuple(p.prior.shape),
                    IJ=tuple(W.shape[:2]),
                )
            )
    if problems:
        raise CapsvizError(problems[0])
    return p


def _check_values(state: dict[str, torch.Tensor]) -> None:
    """Refuse weights no network computes with: complex numbers (capsviz's models are real, and
    making them real would drop half of each), NaN or infinite values (every output they reach
    would be NaN)."""
    for name, tensor in state.items():
        if tensor.is_complex():
            raise CapsvizError(
                t(
                    "{name} {shape} holds complex numbers ({dtype}); a CapsNet's weights are real: save the real network's state dict",
                    name=name,
                    shape=tuple(tensor.shape),
                    dtype=str(tensor.dtype).removeprefix("torch."),
                )
            )
        if tensor.is_floating_point():
            bad = int((~torch.isfinite(tensor)).sum())
            if bad:
                raise CapsvizError(
                    t(
                        "{name} {shape} holds {n} NaN or infinite value(s); not imported: save the weights from before training "
                        "diverged (or with a lower learning rate)",
                        name=name,
                        shape=tuple(tensor.shape),
                        n=bad,
                    )
                )


def _might_be(x: torch.Tensor, *, I: int, J: int, D: int, K: int) -> str:
    """What a tensor that fits no part looks like, and what would work, in a few words."""
    s = tuple(x.shape)
    if x.dim() == 4 and s[2] == s[3]:
        return t("it looks like a conv weight, and capsviz's CapsNet has two (Conv1, PrimaryCaps, each reading the one before)")
    if x.dim() == 2:
        return t("it looks like a Linear layer, and the decoder is three of them {width} -> h1 -> h2 -> pixels", width=J * D)
    if x.dim() == 1:
        return t("it looks like a bias or a norm layer's vector, with no layer of its size to go with")
    if I in s or K in s:
        return t(
            "it may be DigitCaps W in a layout not understood (I = {I}, K = {K}, J = {J}, D = {D}); subclass CapsuleAdapter",
            I=I,
            K=K,
            J=J,
            D=D,
        )
    return t("no part has its shape")


def _is_conv(x: torch.Tensor) -> bool:
    return x.dim() == 4 and x.shape[2] == x.shape[3] and x.shape[2] > 1


def _bias(todo: dict, weight_name: str, size: int) -> torch.Tensor:
    """The bias beside `weight_name` (same module), or zeros when the layer has none."""
    name = weight_name.rsplit(".", 1)[0] + ".bias" if "." in weight_name else weight_name + "_bias"
    b = todo.get(name)
    if b is not None and tuple(b.shape) == (size,):
        return todo.pop(name)
    return torch.zeros(size)


def _natural(name: str) -> list:
    """'caps.10.weight' after 'caps.2.weight': the K convs of a ModuleList in their order."""
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", name)]


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a saved state dict, by name in the file's order, without running any code
    from the file: .safetensors through safetensors, anything else through
    `torch.load(weights_only=True)`. A plain state dict, or a dict holding one under 'state_dict'
    or 'model' (a training checkpoint); anything else is refused in one line."""
    path = Path(path)
    if not path.is_file():
        raise CapsvizError(t("{path}: no such file", path=path))
    if path.suffix == ".safetensors":
        try:
            with safe_open(str(path), framework="pt") as f:
                if "capsviz" in (f.metadata() or {}):
                    raise CapsvizError(t("{path} is already a capsviz checkpoint; put it in the model folder to open it", path=path))
                return {k: f.get_tensor(k) for k in f.keys()}
        except (SafetensorError, OSError, ValueError) as e:
            raise CapsvizError(t("{path}: not a readable safetensors file ({why})", path=path, why=first_line(e)[:200])) from None
    try:
        with warnings.catch_warnings():  # torch warns of pickle protocols on stderr: the refusal below is the one line said
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's message suggests loading the file unsafely: never shown
        raise CapsvizError(
            t(
                "{path}: a safe load refuses it (it holds Python objects: a whole pickled model, custom classes or code; "
                "or it is not a file torch.save wrote); save the weights alone with torch.save(model.state_dict(), path)",
                path=path,
            )
        ) from None
    except Exception as e:  # noqa: BLE001 - any other failure to read means a file that is not a state dict
        raise CapsvizError(
            t("{path}: cannot be read as a PyTorch state dict ({error}: {why})", path=path, error=type(e).__name__, why=first_line(e))
        ) from None
    for candidate in (obj, *(obj.get(k) for k in ("state_dict", "model") if isinstance(obj, dict))):
        if (
            isinstance(candidate, dict)
            and candidate
            and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in candidate.items())
        ):
            return dict(candidate)
    if isinstance(obj, dict):
        raise CapsvizError(
            t(
                "{path}: holds a dict with keys {keys}, not a state dict of tensors (or one under 'state_dict' or 'model')",
                path=path,
                keys=", ".join(map(str, list(obj)[:5])),
            )
        )
    raise CapsvizError(
        t("{path}: holds a {kind}, not a state dict of tensors (or one under 'state_dict' or 'model')", path=path, kind=type(obj).__name__)
    )
