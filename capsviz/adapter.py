"""Your own capsule network in capsviz: `CapsuleAdapter` reads the weights of a PyTorch CapsNet
written elsewhere and makes it a capsviz `CapsNet`, which every page (tour, explorer, routing)
then opens like one trained here: the same predictions u_hat, routing, class capsules v and
masked decoder, because it *is* one.

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
from capsviz.i18n import t, tn

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
            raise CapsvizError(f"primary_order must be one of {', '.join(PRIMARY_ORDERS)}; found {primary_order!r}")
        if primary_channels not in (None, *PRIMARY_CHANNELS):
            raise CapsvizError(f"primary_channels must be one of {', '.join(PRIMARY_CHANNELS)}; found {primary_channels!r}")
        unknown = set(computation or {}) - set(COMPUTATION)
        if unknown:
            raise CapsvizError(f"computation options {sorted(unknown)} unknown; they are {', '.join(COMPUTATION)}")
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
        notes = ["assumed: Conv1 stride 1 and ReLU, PrimaryCaps stride 2, no padding"]
        if "squash" not in self.computation and "primary_squash" not in self.computation:
            notes.append("assumed: the squash of Sabour et al. (Eq. 1) on primary and class capsules")
        if not {"routing_softmax", "routing_logits"} & set(self.computation):
            notes.append("assumed: dynamic routing (softmax over the classes, logits per image, += agreement)")
        notes.append(f"routing iterations: {self.routing_iterations} (--iterations)")
        conv1 = self._conv1(todo)
        primary, convs = self._primary(todo, conv1[0].shape[0])
        G = (self.in_size - conv1[0].shape[-1] + 1 - primary[0].shape[-1]) // 2 + 1
        if G < 1:
            raise CapsvizError(
                f"Conv1 and PrimaryCaps kernels leave no capsule grid on {self.in_size}x{self.in_size} images (pick the right --dataset)"
            )
        W, K = self._digit_weights(todo, G, primary[0].shape[0], convs)
        I, J, D, _ = W.shape
        T = I // (G * G)
        # several convs: K of T channels stack one capsule dimension each (channel d*T + t once
        # concatenated); T of K channels are one capsule type each (channel t*K + d)
        channels = self.primary_channels or ("capsule" if convs == 1 or K != convs else "dim")
        if convs > 1:
            notes.append(f"PrimaryCaps: {convs} convs of {primary[0].shape[0] // convs} channels, read as {T} types of {K} dims")
        prior = self._prior(todo, I, J)
        decoder, winner = self._decoder(todo, J, D)
        if decoder is None:
            notes.append("no decoder found: the model is imported without reconstructions (the explorer needs one)")
        elif winner:
            notes.append(
                f"assumed: decoder ReLU, ReLU, sigmoid, fed the longest class capsule's {D} values alone (its first layer is "
                f"repeated for each class: capsviz's decoder reads all {J} masked to 0 but one, which computes the same)"
            )
        else:
            notes.append("assumed: decoder ReLU, ReLU, sigmoid, fed all class capsules with all but one masked to 0")
        wp, bp = primary
        order = torch.arange(I)
        if self.primary_order == "view":  # the conv's channels (K convs: in order) and W's rows kept as they are
            notes.append(f"assumed: a primary capsule is {K} neighbouring values of the NCHW conv output (--primary-order view)")
        else:
            if channels == "dim":  # channel d*T + t -> t*K + d
                wp = wp.view(K, T, *wp.shape[1:]).transpose(0, 1).reshape(wp.shape)
                bp = bp.view(K, T).T.reshape(-1)
            notes.append(f"assumed: primary capsules numbered {self.primary_order} (--primary-order), channels laid out by {channels}")
            if self.primary_order == "type-major":  # the twin's i = (r, c, t) is the original's (t, r, c)
                order = torch.arange(I).view(T, G * G).T.reshape(-1)
        W = W[order]
        if prior is not None and self.computation.get("routing_prior") is False:
            notes.append(
                t("ignored: the learned routing prior b {shape} (your code routes from 0: --prior none)", shape=tuple(prior.shape))
            )
            prior = None
        elif prior is not None:
            prior = prior[order]
            notes.append(f"a learned routing prior b {tuple(prior.shape)}: routing starts from it")
        for name in list(todo):
            left = todo.pop(name)
            if left.is_floating_point() and bool((left == 0).all()):
                notes.append(f"ignored: {name} {tuple(left.shape)} (all zeros)")
            elif left.numel() == J * D:
                raise CapsvizError(
                    f"{name} {tuple(left.shape)} looks like a DigitCaps bias and is not zero; capsviz's DigitCaps has none "
                    "(s_j = sum_i c_ij u_hat_j|i), so this network cannot be imported as it computes"
                )
            else:
                raise CapsvizError(
                    f"{name} {tuple(left.shape)} fits no part of a CapsNet: {_might_be(left, I=I, J=J, D=D, K=K)}; {_EXPECTED}"
                )
        self._order = order
        return Parts(conv1=conv1, primary=(wp, bp), primary_dim=K, W=W, decoder=decoder, notes=notes, prior=prior)

    def _prior(self, todo: dict, I: int, J: int) -> torch.Tensor | None:
        """A learned routing prior: a tensor that is (I, J) once its sizes of 1 are dropped, not all
        zeros (an all-zero logit buffer changes nothing and is ignored with the rest)."""
        found = [k for k, t in todo.items() if t.is_floating_point() and tuple(s for s in t.shape if s != 1) in ((I, J), (J, I))]
        found = [k for k in found if not bool((todo[k] == 0).all())]
        if len(found) > 1:
            raise CapsvizError(f"ambiguous routing prior: {', '.join(found)} could each be the learned logits b ({I} x {J})")
        if not found:
            return None
        t = todo.pop(found[0]).reshape(-1)
        shape = tuple(s for s in self.state[found[0]].shape if s != 1)
        return t.view(I, J) if shape == (I, J) else t.view(J, I).T.contiguous()

    def _conv1(self, todo: dict) -> tuple[torch.Tensor, torch.Tensor]:
        found = [k for k, t in todo.items() if _is_conv(t) and t.shape[1] in (1, 3)]
        if not found:
            raise CapsvizError(f"no Conv1 found (a conv weight of shape (C1, 1, k, k)); {_EXPECTED}")
        name = found[0]  # the first by order: a later one with few input channels would be a later layer
        w = todo.pop(name)
        if w.shape[1] != 1:
            raise CapsvizError(f"Conv1 {name} takes {w.shape[1]} input channels; capsviz's datasets are greyscale (1 channel)")
        return w, _bias(todo, name, w.shape[0])

    def _primary(self, todo: dict, c1: int) -> tuple[tuple[torch.Tensor, torch.Tensor], int]:
        """Its weight and bias (several convs concatenated in order), and how many convs."""
        found = sorted((k for k, t in todo.items() if _is_conv(t) and t.shape[1] == c1), key=_natural)
        if not found:
            raise CapsvizError(
                f"no PrimaryCaps found (a conv weight of shape (T*K, {c1}, k, k), or K of shape (T, {c1}, k, k)); {_EXPECTED}"
            )
        shapes = {tuple(todo[k].shape) for k in found}
        if len(shapes) > 1:
            raise CapsvizError(f"ambiguous PrimaryCaps: convs of different shapes read Conv1's {c1} channels ({', '.join(found)})")
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
        if convs > 1:
            I = " or ".join(f"G*G*T = {G * G * channels // k} (K = {k})" for k in dims)
            I += f", PrimaryCaps being {convs} convs of {per_conv} channels"
        else:
            I = f"G*G*T = {G * G * channels // dims[0]}" if len(dims) == 1 else f"G*G*T with T*K = {channels}"
        if not found:
            left = sorted(todo.items(), key=lambda kv: -kv[1].numel())[:3]  # the largest tensors not placed: W is usually one
            seen = "; the largest left: " + ", ".join(f"{k} {tuple(t.shape)}" for k, t in left) if left else ""
            raise CapsvizError(
                f"no DigitCaps W found (a tensor with the {I} primary capsules and their K dims among its sizes, 4-D or 3-D "
                f"(I, K, J*D)){seen}; {_EXPECTED}"
            )
        if len(found) > 1:
            raise CapsvizError(f"ambiguous DigitCaps W: {', '.join(f'{n} (K = {k})' for n, k in found)} could each be it")
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
                f"DigitCaps W {name} {shape}: cannot tell its layout; understood: (I, J, D, K), (I, J, K, D), (J, I, K, D), "
                f"(J, I, D, K), a leading 1 allowed, with I = {I} primary capsules of K = {K} dims, J != I, D != K"
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
                f"DigitCaps W {name} {shape}: cannot tell its layout (two sizes are equal); understood 3-D: (I, K, J*D) or "
                f"(I, J*D, K) with I = {I} primary capsules, K = {K}, J = {J} classes"
            )
        i, k = shape.index(I), shape.index(K)
        jd = 3 - i - k
        W = W.permute(i, jd, k)  # (I, J*D, K)
        return W.reshape(I, J, shape[jd] // J, K).contiguous()

    def _decoder(self, todo: dict, J: int, D: int) -> tuple[list[tuple[torch.Tensor, torch.Tensor]] | None, bool]:
        """The three Linear layers, the first reading capsviz's masked J*D inputs, and whether the
        original's reads the longest capsule's D values alone (its first weight repeated J times
        here: of the masked input only that capsule's block is not 0, so both compute the same)."""
        linear = [k for k, t in todo.items() if t.dim() == 2]
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
                what = "none" if not step else "several: " + ", ".join(step)
                raise CapsvizError(
                    f"decoder: expected one Linear layer reading {need} inputs after {len(layers)} layer(s), found {what}; "
                    f"capsviz's decoder is three Linear layers {width} (or {D}: the longest capsule alone) -> h1 -> h2 -> "
                    f"{self.in_size * self.in_size}"
                )
            w = todo.pop(step[0])
            layers.append((w.repeat(1, J) if winner and not layers else w, _bias(todo, step[0], w.shape[0])))  # (h1, J*D)
            need = w.shape[0]
        if need != self.in_size * self.in_size:
            raise CapsvizError(
                f"decoder draws {need} pixels; {self.in_size}x{self.in_size} images have {self.in_size**2} (pick the right --dataset)"
            )
        return layers, winner


def _fitting(p: Parts, in_size: int) -> Parts:
    """`p` if its tensors make one CapsNet on in_size x in_size images; else the first mismatch, in one line."""
    (w1, b1), (wp, bp), W, K = p.conv1, p.primary, p.W, p.primary_dim
    problems = []
    if w1.dim() != 4 or wp.dim() != 4 or W.dim() != 4:
        problems.append(f"Conv1 {tuple(w1.shape)} and PrimaryCaps {tuple(wp.shape)} must be conv weights, W {tuple(W.shape)} (I, J, D, K)")
    else:
        G = (in_size - w1.shape[-1] + 1 - wp.shape[-1]) // 2 + 1
        T = wp.shape[0] // K
        if wp.shape[1] != w1.shape[0]:
            problems.append(f"PrimaryCaps reads {wp.shape[1]} channels; Conv1 gives {w1.shape[0]}")
        if wp.shape[0] % K or W.shape[3] != K:
            problems.append(f"PrimaryCaps' {wp.shape[0]} channels and W's last size {W.shape[3]} must be T x {K} and {K}")
        elif W.shape[0] != G * G * T:
            problems.append(
                f"W holds {W.shape[0]} primary capsules; a {G}x{G} grid of {T} types on {in_size}x{in_size} images has {G * G * T}"
            )
        if tuple(b1.shape) != (w1.shape[0],) or tuple(bp.shape) != (wp.shape[0],):
            problems.append("a conv bias does not match its weight's output channels")
        if p.decoder is not None:
            sizes = [W.shape[1] * W.shape[2]] + [w.shape[0] for w, _ in p.decoder]
            if len(p.decoder) != 3 or any(w.shape[1] != n for (w, _), n in zip(p.decoder, sizes, strict=False)) or sizes[-1] != in_size**2:
                problems.append(f"the decoder must be three Linear layers {sizes[0]} -> h1 -> h2 -> {in_size**2}")
        if p.prior is not None and tuple(p.prior.shape) != tuple(W.shape[:2]):
            problems.append(f"the routing prior {tuple(p.prior.shape)} must be (I, J) = {tuple(W.shape[:2])}")
    if problems:
        raise CapsvizError(f"the parts found do not make one CapsNet: {problems[0]}")
    return p


def _check_values(state: dict[str, torch.Tensor]) -> None:
    """Refuse weights no network computes with: complex numbers (capsviz's models are real, and
    making them real would drop half of each), NaN or infinite values (every output they reach
    would be NaN)."""
    for name, tensor in state.items():
        if tensor.is_complex():
            raise CapsvizError(
                f"{name} {tuple(tensor.shape)} holds complex numbers ({str(tensor.dtype).removeprefix('torch.')}); a CapsNet's weights are real: "
                "save the real network's state dict"
            )
        if tensor.is_floating_point():
            bad = int((~torch.isfinite(tensor)).sum())
            if bad:
                raise CapsvizError(
                    f"{name} {tuple(tensor.shape)} holds {bad} NaN or infinite value(s); not imported: save the weights from before "
                    "training diverged (or with a lower learning rate)"
                )


def _might_be(t: torch.Tensor, *, I: int, J: int, D: int, K: int) -> str:
    """What a tensor that fits no part looks like, and what would work, in a few words."""
    s = tuple(t.shape)
    if t.dim() == 4 and s[2] == s[3]:
        return "a conv weight, and capsviz's CapsNet has two (Conv1, PrimaryCaps, each reading the one before)"
    if t.dim() == 2:
        return f"a Linear layer, and the decoder is three of them {J * D} -> h1 -> h2 -> pixels"
    if t.dim() == 1:
        return "a bias or a norm layer's vector, with no layer of its size to go with"
    if I in s or K in s:
        return f"perhaps DigitCaps W in a layout not understood (I = {I}, K = {K}, J = {J}, D = {D}); subclass CapsuleAdapter"
    return "no part has its shape"


_EXPECTED = "capsviz understands Conv1 -> PrimaryCaps -> DigitCaps W (-> 3-layer decoder) (README: Your own model)"


def _is_conv(t: torch.Tensor) -> bool:
    return t.dim() == 4 and t.shape[2] == t.shape[3] and t.shape[2] > 1


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
        raise CapsvizError(f"{path}: no such file")
    if path.suffix == ".safetensors":
        try:
            with safe_open(str(path), framework="pt") as f:
                if "capsviz" in (f.metadata() or {}):
                    raise CapsvizError(f"{path} is already a capsviz checkpoint; put it in the model folder to open it")
                return {k: f.get_tensor(k) for k in f.keys()}
        except (SafetensorError, OSError, ValueError) as e:
            raise CapsvizError(f"{path}: not a readable safetensors file ({str(e).splitlines()[0][:200]})") from None
    try:
        with warnings.catch_warnings():  # torch warns of pickle protocols on stderr: the refusal below is the one line said
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's message suggests loading the file unsafely: never shown
        raise CapsvizError(
            f"{path}: a safe load refuses it (it holds Python objects: a whole pickled model, custom classes or code; "
            "or it is not a file torch.save wrote); save the weights alone with torch.save(model.state_dict(), path)"
        ) from None
    except Exception as e:  # noqa: BLE001 - any other failure to read means a file that is not a state dict
        raise CapsvizError(f"{path}: cannot be read as a PyTorch state dict ({type(e).__name__}: {first_line(e)})") from None
    for candidate in (obj, *(obj.get(k) for k in ("state_dict", "model") if isinstance(obj, dict))):
        if (
            isinstance(candidate, dict)
            and candidate
            and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in candidate.items())
        ):
            return dict(candidate)
    kind = f"a dict with keys {', '.join(map(str, list(obj)[:5]))}" if isinstance(obj, dict) else f"a {type(obj).__name__}"
    raise CapsvizError(f"{path}: holds {kind}, not a state dict of tensors (or one under 'state_dict' or 'model')")


def import_file(
    src: Path,
    out: Path,
    *,
    dataset: str = "mnist",
    replace: bool = False,
    data_dir=None,
    limit: int | None = None,
    primary_order: str | None = None,
    primary_channels: str | None = None,
    evaluate: bool = True,
    on_progress=None,
    adapter: type[CapsuleAdapter] = CapsuleAdapter,
    iterations: int | None = None,
    computation: dict | None = None,
    against: str | None = None,
    against_args: dict | None = None,
    against_input: str | None = None,
    normalise: tuple[float, float] | None = None,
    check_images: int = 16,
) -> dict:
    """`capsviz import`: the network saved at `src` as a capsviz checkpoint at `out`, under the
    rule every writer follows (`checkpoint.plan_write`: never a shipped model, never over another
    one without `replace`). Its test error on `dataset`'s test images (the first `limit`) is
    measured and stored; where the images are missing, or `evaluate` is off, it is stored as not
    evaluated. `adapter`: a subclass of CapsuleAdapter for another layout. `iterations`: routing
    iterations (3 when None and not searched); `computation`: CapsuleAdapter's, how the network
    differs from the paper; `normalise`: (mean, std) the network's images were normalised with.
    `primary_order`, `primary_channels`: CapsuleAdapter's (None: "type-major" and the default
    channels without `against`, searched with it).

    `against` ("MODULE:NAME", called with `against_args`) RUNS THE USER'S CODE: their network is
    built, given the same weights, and compared stage by stage with the twin on `check_images`
    test images (capsviz.against); the options not given are searched, and the twin is stored
    only if every stage seen matches within 1e-4 (else a CapsvizError names the first stage that
    differs). The network is fed what `against_input` (the user's transform, dataset or
    DataLoader, "MODULE:NAME") makes of the images, or the images normalised by `normalise`, or
    else each normalisation in common use, the one its lengths fit the labels far best on kept;
    the checkpoint says which, and the warnings of `plausibility` the check did not cover stay
    on. Without `against` the twin is stored marked "not checked against its code", with all of
    them, and `other_routings`' where the iterations or the prior's use were not said. Returns what the command
    prints: the checkpoint, its metrics, the check, the warnings and the notes."""
    from capsviz import checkpoint as ckpt
    from capsviz.config import DATASETS

    if dataset not in DATASETS:
        raise CapsvizError(f"unknown dataset {dataset!r}; choose from {', '.join(DATASETS)}")
    out = Path(out)
    if out.suffix != ".safetensors":
        raise CapsvizError(f"--out {out}: a capsviz checkpoint is a .safetensors file; name it e.g. {out.with_suffix('.safetensors').name}")
    ckpt.plan_write(out, replace=replace)  # refused now, before the reading and the evaluation
    state = read_state_dict(src)
    _check_values(state)
    in_size, classes = DATASETS[dataset].in_size, len(_class_names(dataset))
    computation = dict(computation or {})
    if normalise is not None:
        computation["input_mean"], computation["input_std"] = (float(v) for v in normalise)
    checked = None
    if against is None:
        reader = adapter(
            state,
            in_size=in_size,
            num_classes=classes,
            primary_order=primary_order or "type-major",
            primary_channels=primary_channels,
            routing_iterations=iterations or 3,
            computation=computation,
        )
    else:
        given = {k: v for k, v in computation.items() if k not in ("input_mean", "input_std")}
        given |= {
            k: v for k, v in (("primary_order", primary_order), ("primary_channels", primary_channels), ("iterations", iterations)) if v
        }
        if normalise is not None:
            given["normalise"] = tuple(float(v) for v in normalise)
        reader, checked, told, guessed = _checked_against(
            state, against, against_args, dataset, data_dir, check_images, adapter, in_size, classes, given, against_input
        )
    model = reader.model()
    notes = list(reader.notes)
    metrics = _evaluate(model, dataset, data_dir, limit, on_progress) if evaluate else None
    if metrics is None:
        notes.append("not evaluated: " + ("--no-evaluate" if not evaluate else f"the {dataset} test images were not found"))
    # a check covers the network's computation; its input pipeline only where the user gave it
    warnings_ = [] if checked and told else plausibility(model, dataset, data_dir, metrics, checked=checked is not None)
    if checked and guessed:
        warnings_.insert(0, guessed)
    prior_said = "routing_prior" in computation
    if against is None and (iterations is None or (reader.get_parts().prior is not None and not prior_said)):
        # the routing was assumed: say when another way the weights allow fits them as well
        warnings_ += other_routings(model, dataset, data_dir, count_said=iterations is not None, prior_said=prior_said)
    meta = {
        "dataset": dataset,
        "complete": True,
        "hardware": f"trained outside capsviz (imported from {Path(src).name})"[:500],
        "imported": {"file": Path(src).name[:255], "sha256": _file_digest(src), "notes": notes, "warnings": warnings_, "checked": checked},
    }
    if metrics is not None:
        meta["metrics"] = metrics
    with ckpt.writer_lock(out):
        ckpt.recover(out)
        ckpt.plan_write(out, replace=replace)  # finished and evaluated: it goes straight to `out`
        ckpt.save_checkpoint(out, model, meta)
    check_words = checked_words(checked, warnings_)
    return {"checkpoint": str(out), **(metrics or {"evaluated": False}), "check": check_words, "warnings": warnings_, "notes": notes}


def _checked_against(state, spec, spec_args, dataset, data_dir, n, adapter, in_size, classes, given, pipeline=None):
    """The adapter whose twin matches the user's own network on n test images, what the
    checkpoint records of the check, whether the input pipeline was the user's word (their
    `pipeline` MODULE:NAME or --normalise) rather than inferred, and the warning that it was a
    guess (None where it was not); a CapsvizError naming the first
    stage that differs. Without a pipeline the network is compared on [0, 1] images and on each
    of the normalisations in common use, and the one its lengths fit the labels far best on is
    kept (else [0, 1], said to be a guess)."""
    from capsviz import against

    net = against.load_network(spec, spec_args)
    try:
        net.load_state_dict(state, strict=True)
    except Exception as e:  # noqa: BLE001 - the user's class does not take the file's tensors
        raise CapsvizError(f"--against {spec}: your network does not take this file's weights ({first_line(e)})") from None
    net = net.float().eval()
    stated_batch = given.pop("routing_batch", None)

    def make(st, **kw):
        return adapter(st, in_size=in_size, num_classes=classes, **kw)

    def reader_for(s: dict) -> CapsuleAdapter:
        keep = {k: s[k] for k in COMPUTATION if k in s}
        return make(
            state,
            primary_order=s["primary_order"],
            primary_channels=s["primary_channels"],
            routing_iterations=s["iterations"],
            computation=keep,
        )

    def compare(count: int, options: dict):
        x = _test_images(dataset, data_dir, count)
        if x is None:
            raise CapsvizError(f"--against compares on real test images, and the {dataset} test images were not found (capsviz data)")
        feed, batch = None, None
        if pipeline:
            feed, batch = against.input_images(pipeline, x)
            options = {**options, "normalise": against.normalisation_of(feed, x, pipeline)}
        result = against.check(state, net, x, make_adapter=make, given=options, feed=feed)
        if not result.ok:
            raise CapsvizError(f"not imported: {result.message}")
        return result, x, batch, options.get("normalise", (0.0, 1.0))

    result, x, loader_batch, fed = compare(n, given)
    s = result.setting
    fixed = {**given, **{k: s[k] for k in against.SEARCHED}}  # the network's own computation, as found
    guessed = None
    if pipeline:
        words, told = f"your input pipeline {pipeline}, {_images_words(*fed)}", True
    elif "normalise" in given:
        words, told = f"{_images_words(*fed)} (--normalise)", True
    else:  # the pipeline is not told: a trained network's lengths are far more decisive on its own input scale
        labelled = _labelled_test_images(dataset, data_dir, FIT_IMAGES)
        tried = {fed: (result, _fit(reader_for(s), *labelled))}
        for norm in against.NORMALISATIONS[1:]:
            other = against.check(state, net, x, make_adapter=make, given={**fixed, "normalise": norm})
            if other.ok:
                tried[norm] = (other, _fit(reader_for(other.setting), *labelled))
        best = min(tried, key=lambda k: tried[k][1])
        rest = min((d for k, (_, d) in tried.items() if k != best), default=float("inf"))
        said = "; ".join(f"{_images_words(*k)} {d:.3f}" for k, (_, d) in tried.items())
        if tried[best][1] * DECISIVE <= rest:
            fed, result = best, tried[best][0]
            words, why = f"{_images_words(*fed)}, inferred from its lengths", "its lengths fit the labels far best there"
        else:
            words, why = f"{_images_words(*fed)}, a guess", "its lengths fit the labels about as well on another normalisation"
            guessed = t(
                "your input pipeline was not given, and your network's lengths do not say which images it was trained on: "
                "margin loss on {n} test images {fits}; the twin is fed {fed}, a guess, and the check covers its "
                "computation alone; give what your evaluation feeds it with --against-input MODULE:NAME or --normalise MEAN STD",
                n=labelled[0].shape[0],
                fits=said,
                fed=_images_words(*fed),
            )
        detail = (
            f"your input pipeline not given: {words}: {why} (margin loss on {labelled[0].shape[0]} test images, {said}); "
            "--against-input or --normalise says it"
        )
        s, told = result.setting, False
        fixed["normalise"] = fed
    if s["routing_logits"] != "image":
        batch = stated_batch or loader_batch
        if batch is None:
            how = "averages" if s["routing_logits"] == "batch" else "sums"
            raise CapsvizError(
                f"not imported: your network {how} its routing logits over the batch (found on {result.images} images), so its "
                "answers depend on the batch size your evaluation uses: say it with --routing-batch N, or give your DataLoader "
                "with --against-input MODULE:NAME"
            )
        if batch != result.images:  # checked again on one whole batch of the user's size
            result, x, _, _ = compare(batch, {**fixed, "routing_batch": batch})
            s = result.setting
    reader = reader_for(s)
    checked = {
        "against": spec[:500],
        "max_difference": result.max_difference,
        "images": result.images,
        "stages": list(result.seen),
        "input": words[:500],
    }
    reader.get_parts().notes.append(f"{result.message}, fed {words}")
    if not told:
        reader.get_parts().notes.append(detail)
    return reader, checked, told, guessed


# How a network's lengths fit the test labels (Eq. 4's margin loss, what it was trained to lower):
# on FIT_IMAGES images, DECISIVE times lower on one input normalisation than on every other for
# the import to take that one as the scale it was trained on. A network trained 30 steps on
# synthetic digits already fits 3-10 times better on its own scale; untrained ones fit all alike.
FIT_IMAGES = 256
DECISIVE = 2.0


def _fit(reader: CapsuleAdapter, x: torch.Tensor, y: torch.Tensor) -> float:
    """The twin's margin loss on the labelled images x, y: low where its lengths pick the labels decisively."""
    with torch.no_grad():
        return _fit_lengths(reader.model()(x).scores, y)


def _fit_lengths(lengths: torch.Tensor, y: torch.Tensor) -> float:
    """Eq. 4's margin loss of class-capsule lengths (B, J) against labels y."""
    from capsviz.losses import margin_loss

    targets = y if y.dim() == 1 else torch.nn.functional.one_hot(y, lengths.shape[1]).sum(1).clamp(max=1)  # MultiMNIST's two ids
    return float(margin_loss(lengths, targets))


def _images_words(mean: float, std: float) -> str:
    return "[0, 1] pixels" if (mean, std) == (0.0, 1.0) else f"pixels (x - {mean:.4g}) / {std:.4g}"


def checked_words(checked: dict | None, warnings: list[str] = ()) -> str:
    """The zoo's mark for an imported model, from what its checkpoint records (`imported.checked`
    and `imported.warnings`: the first warning's finding, without its advice, is said too, also
    for a checked model: what its check did not cover, such as a guessed input pipeline)."""
    more = f" (and {len(warnings) - 1} more)" if len(warnings) > 1 else ""
    warned = f"; the import warned: {warnings[0].split(':')[0]}{more}" if warnings else ""
    if checked:
        fed = f" fed {checked['input']}" if checked.get("input") else ""  # older imports do not say
        return f"checked against its code: max difference {checked['max_difference']:.2g} on {checked['images']} images{fed}{warned}"
    return f"not checked against its code{warned}"


def how_it_computes(meta) -> list[str]:
    """What the pages say of a model written elsewhere, in plain words: whether it was checked
    against its own code, and each way it computes differently from the paper
    (capsviz.families.capsnet.model.computation_words). Empty for capsviz's own models."""
    from capsviz.families.capsnet.model import computation_words

    raw = meta.raw if hasattr(meta, "raw") else meta
    imported = raw.get("imported") if isinstance(raw, dict) else None
    lines = [] if imported is None else [checked_words(imported.get("checked"), imported.get("warnings") or [])]
    return lines + computation_words(meta.config)


# What a trained CapsNet shows on real test images (the shipped capsnet-mnist, capsnet-small-mnist
# and capsnet-one-iteration-mnist on MNIST's first 64: median primary-capsule length 0.99, longest
# class capsule 0.91-0.94 on average, shortest 0.002-0.004, reconstruction error 0.16-0.26 of the
# image's own energy); a twin far outside these computes other numbers than its original
PRIMARY_SHORT = 0.5
SATURATED, COLLAPSED = 0.9, 0.1
RECONSTRUCTION_POOR = 0.7
ERROR_HIGH = 20.0


def plausibility(model, dataset: str, data_dir=None, metrics: dict | None = None, n: int = 64, *, checked: bool = False) -> list[str]:
    """Warnings that a twin computes other numbers than the network it was imported from, each
    saying what it points to; empty when nothing looks wrong or the test images are missing.
    `checked`: the twin's computation was checked against its code, its input pipeline was not:
    only the findings another input normalisation would explain are said."""
    x = _test_images(dataset, data_dir, n)
    if x is None:
        return []
    with torch.no_grad():
        primary = model.primary_capsules(x).norm(dim=-1)  # (B, I)
        out = model(x)
    lengths = out.scores  # (B, J)
    found = []
    if checked:
        after = "; give the pipeline your evaluation feeds it with --against-input MODULE:NAME or --normalise MEAN STD"
    else:
        after = "; check the import against your code with --against MODULE:CLASS (README: Your own model)"
    if float(lengths.min()) > SATURATED and not checked:
        found.append(
            f"every class capsule is longer than {SATURATED} on every image (saturated): the squash, the routing's softmax or "
            f"its logits probably differ from your code's{after}"
        )
    elif float(lengths.max()) < COLLAPSED:
        cause = "the input's normalisation" if checked else "the squash's axis, the input's normalisation or the capsules' grouping"
        found.append(
            f"every class capsule is shorter than {COLLAPSED} on every image (collapsed): {cause} probably differ from your code's{after}"
        )
    median = float(primary.median())
    if median < PRIMARY_SHORT:
        cause = "the input's normalisation" if checked else "their grouping, the squash's axis or the input's normalisation"
        found.append(
            f"the primary capsules are short (median length {median:.2f}; a trained CapsNet's are mostly above 0.9): {cause} "
            f"probably differ from your code's{after}"
        )
    if out.reconstruction is not None and not checked:
        rec, img = out.reconstruction.flatten(1), x.flatten(1)
        ratio = float(((rec - img) ** 2).sum() / (img**2).sum().clamp_min(1e-12))
        if ratio > RECONSTRUCTION_POOR:
            found.append(
                f"the decoder barely redraws the images (error {ratio:.2f} of their own energy; a trained CapsNet's is about 0.2): it "
                f"was trained on other class capsules than this twin computes{after}"
            )
    if metrics is not None and metrics["test_error"] > ERROR_HIGH:
        cause = (
            "the input's normalisation" if checked else "the capsules' numbering (--primary-order, --primary-channels) or the computation"
        )
        found.append(
            f"{metrics['test_error']:.1f}% test error, far above a trained CapsNet's: {cause} probably differ from your code's{after}"
        )
    return found


# Another routing "fits as well" when its margin loss is at most this much above the assumed
# one's: a CapsNet trained to route 4 times and routed 3 fits within 3% (its lengths differ by
# about 0.01), while the count it was trained with fits best
FIT_AS_WELL = 1.05


def other_routings(model, dataset: str, data_dir=None, *, count_said: bool = False, prior_said: bool = False) -> list[str]:
    """A warning when routing the twin's predictions another way its weights allow fits the labels
    of FIT_IMAGES test images as well as the twin's own routing or better, and gives other lengths:
    the weights alone then do not say how the original routes. The ways tried: 1 to 6 iterations
    (unless `count_said`) and, where the weights hold a learned routing prior and `prior_said` is
    off, routing from it or from 0 (code may keep a logit tensor it never routes from). Empty where
    the test images are missing."""
    from dataclasses import replace

    from capsviz.against import MAX_ITERATIONS_TRIED
    from capsviz.routing import DynamicOptions, class_squash, route

    labelled = _labelled_test_images(dataset, data_dir, FIT_IMAGES)
    if labelled is None:
        return []
    x, y = labelled
    cfg = model.config
    stated = (cfg.routing_iterations, bool(cfg.routing_prior))
    own = model.dynamic_options()
    priors = [stated[1]] if prior_said or not cfg.routing_prior else [True, False]
    squash = class_squash(cfg.squash, cfg.class_squash)
    longest = max(MAX_ITERATIONS_TRIED, stated[0])
    lengths = {}
    with torch.no_grad():
        u_hat = model.predictions(x)  # (B, J, I, D)
        for prior in priors:
            options = own if prior else replace(own or DynamicOptions(), prior=None)
            trace = route(cfg.couplings, u_hat, iterations=longest, squash=squash, record=True, dynamic=options)
            for count in [stated[0]] if count_said else range(1, longest + 1):
                lengths[count, prior] = trace.v_trace[count - 1].norm(dim=-1)  # (B, J)
    fits = {k: _fit_lengths(v, y) for k, v in lengths.items()}
    if len(fits) == 1:
        return []
    best = min((k for k in fits if k != stated), key=fits.get)
    change = float((lengths[best] - lengths[stated]).abs().max())
    if fits[best] > fits[stated] * FIT_AS_WELL or change <= 1e-4:
        return []
    agree = 100 * float((lengths[best].argmax(1) == lengths[stated].argmax(1)).float().mean())
    measured = {
        "loss": f"{fits[best]:.3f}",
        "own": f"{fits[stated]:.3f}",
        "images": len(y),
        "change": f"{change:.3f}",
        "agree": f"{agree:.1f}",
    }
    if best[1] == stated[1]:
        return [
            tn(
                "routing {n} time fits these weights as well as {stated} (margin loss {loss} against {own} on {images} test "
                "images; lengths differ by up to {change}, the same answer on {agree}% of them): the weights do not say how "
                "many times your code routes; say it with --iterations, or check with --against MODULE:CLASS",
                "routing {n} times fits these weights as well as {stated} (margin loss {loss} against {own} on {images} test "
                "images; lengths differ by up to {change}, the same answer on {agree}% of them): the weights do not say how "
                "many times your code routes; say it with --iterations, or check with --against MODULE:CLASS",
                best[0],
                stated=stated[0],
                **measured,
            )
        ]
    prior = model.routing_prior.detach()
    return [
        tn(
            "routing {n} time from 0, not from the learned prior b {shape} the weights hold, fits them as well as "
            "routing {stated} times from it (margin loss {loss} against {own} on {images} test images; lengths differ by up to "
            "{change}, the same answer on {agree}% of them; b's values reach {size}): the weights do not say whether your "
            "code starts its routing from b; say it with --prior none or --prior learned, or check with --against MODULE:CLASS",
            "routing {n} times from 0, not from the learned prior b {shape} the weights hold, fits them as well as "
            "routing {stated} times from it (margin loss {loss} against {own} on {images} test images; lengths differ by up to "
            "{change}, the same answer on {agree}% of them; b's values reach {size}): the weights do not say whether your "
            "code starts its routing from b; say it with --prior none or --prior learned, or check with --against MODULE:CLASS",
            best[0],
            stated=stated[0],
            shape=tuple(prior.shape),
            size=f"{float(prior.abs().max()):.2g}",
            **measured,
        )
    ]


def _test_images(dataset: str, data_dir, n: int) -> torch.Tensor | None:
    """The first n test images of `dataset` as the model reads them (B, C, S, S) in [0, 1], or None where missing."""
    got = _labelled_test_images(dataset, data_dir, n)
    return None if got is None else got[0]


def _labelled_test_images(dataset: str, data_dir, n: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The first n test images (B, C, S, S) in [0, 1] and their labels, or None where missing."""
    from capsviz.data import batches, load_split

    try:
        data = load_split(dataset, "test", data_dir)
    except CapsvizError:
        return None
    x, y, _ = next(iter(batches(dataset, data, n, train=False, limit=n)))
    return x.float(), y


def _class_names(dataset: str):
    from capsviz.data import class_names

    return class_names(dataset)


def _evaluate(model, dataset: str, data_dir, limit, on_progress) -> dict | None:
    from capsviz.data import load_split
    from capsviz.train import evaluate

    try:
        data = load_split(dataset, "test", data_dir)
    except CapsvizError:
        return None
    n = model.config.routing_batch if model.config.routing_logits != "image" else 0
    batch = n * max(1, 256 // n) if n else 256  # batch-averaged logits: whole groups of the stated size, as the original's loop
    return evaluate(model, dataset, data, batch_size=batch, limit=limit, on_progress=on_progress)


def _file_digest(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
