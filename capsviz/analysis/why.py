"""Why capsules: the papers' argument before the mechanics, measured on real models.

Both papers, and every explainer after them, start from one story: a CNN's pooling keeps *whether*
a part is present and throws away *where*, so its answer is *invariant* to the pose; a capsule's
length says whether, its direction says how, so it is *equivariant* (the vector changes with the
pose while the answer stays); a face with its parts in the wrong places fools a CNN but not parts
that must agree; and in matrix capsules a change of viewpoint moves all the votes together, so
their agreement survives it. This module measures each claim on a capsule model and the baseline
CNN over real test images, and every sentence it writes is decided by a rule of
capsviz.analysis.rules from the numbers it quotes, which are the numbers its charts draw.

Measurements are over the first `WHY_IMAGES` test images (whole sweeps, kept by the caller once
per process and on disk, capsviz.analysis.stored); the single-image views take one image and
answer in milliseconds.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from capsviz.analysis import as_input_batch, rules, stored
from capsviz.data.affine import transform
from capsviz.i18n import N_, t, tn
from capsviz.routing import em_routing

SHIFTS = (0, 1, 2, 3, 4)  # pixels to the right: up to twice the 2 px the paper trained with
ANGLES = (-30, -20, -10, 0, 10, 20, 30)  # degrees, positive anticlockwise: the range
KINDS = {"shift": SHIFTS, "rotate": ANGLES}
WHY_IMAGES = 1000  # test images per sweep: a rate on 1,000 has a chance band of about ±1 point at 99%
BATCH = 100  # images per forward pass: a CapsNet's predictions for 100 images are about 74 MB
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


def _relative(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|b - a| / |a| per row of (B, ...) tensors: how far b moved, as a share of a's size."""
    return (b - a).flatten(1).norm(dim=1) / a.flatten(1).norm(dim=1).clamp_min(1e-8)


def _angle(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The angle (degrees) between each row of a and b (B, D)."""
    cos = F.cosine_similarity(a, b, dim=1).clamp(-1, 1)
    return torch.rad2deg(torch.acos(cos))


def _cnn(cnn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The CNN's pooled features (B, F) (the last max-pool's output) and class scores (B, J)."""
    f = cnn.features(x)  # (B, C, H', W')
    logits = cnn.head(f)
    return f.flatten(1), logits.softmax(-1)


def _capsules(caps, x: torch.Tensor) -> torch.Tensor:
    """The class capsules v (B, J, D) of a vector-capsule model."""
    return caps.classify(x).capsules.float()


def _winner(v: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """Each image's capsule j (B,) of v (B, J, D) -> (B, D)."""
    return v[torch.arange(len(j)), j]


# --- invariance against equivariance ---------------------------------------------------------------

FIELDS = ("cnn_kept", "cnn_scores", "cnn_features", "caps_kept", "caps_length", "caps_vector", "caps_angle", "caps_dims", "follows")


@torch.no_grad()
def invariance_sweep(caps, cnn, images: torch.Tensor, batch: int = BATCH) -> dict:
    """Every change of KINDS on the test images `images` (N, H, W) uint8, each image against
    itself unchanged. For each kind, lists over its values (means over the images): the CNN's
    answer kept (%), the relative change of its class scores and of its pooled features (%); the
    winning capsule's (the capsule model's answer on the unchanged image) answer kept (%), length,
    relative change (%), angle turned (degrees), dimensions that move (rules.dimension_moves), and
    the share (%) of images whose reconstruction is closer to the moved digit than to the
    unchanged one. A dict of names to lists of numbers (capsviz.analysis.stored keeps it)."""
    x_all = as_input_batch(images)
    n = len(x_all)
    result: dict = {"images": n}
    for kind, values in KINDS.items():
        sums = {f: [0.0] * len(values) for f in FIELDS}
        for xb in x_all.split(batch):
            f0, p0 = _cnn(cnn, xb)
            v0 = _capsules(caps, xb)
            j = v0.norm(dim=-1).argmax(1)  # (B,) the winning capsule on the unchanged digit
            w0 = _winner(v0, j)
            for k, amount in enumerate(values):
                xm = moved(xb, kind, amount)
                f1, p1 = _cnn(cnn, xm)
                v1 = _capsules(caps, xm)
                w1 = _winner(v1, j)
                rec = caps.decode(w1, j).reshape(xb.shape)
                closer = (rec - xm).pow(2).flatten(1).sum(1) < (rec - xb).pow(2).flatten(1).sum(1)
                sums["cnn_kept"][k] += float((p1.argmax(1) == p0.argmax(1)).sum()) * 100
                sums["cnn_scores"][k] += float(_relative(p0, p1).sum()) * 100
                sums["cnn_features"][k] += float(_relative(f0, f1).sum()) * 100
                sums["caps_kept"][k] += float((v1.norm(dim=-1).argmax(1) == j).sum()) * 100
                sums["caps_length"][k] += float(w1.norm(dim=-1).sum())
                sums["caps_vector"][k] += float(_relative(w0, w1).sum()) * 100
                sums["caps_angle"][k] += float(_angle(w0, w1).sum())
                sums["caps_dims"][k] += float(((w1 - w0).abs() >= rules.DIM_STEP).sum())
                sums["follows"][k] += float(closer.sum()) * 100
        result[f"{kind}_values"] = [float(v) for v in values]
        for f in FIELDS:
            result[f"{kind}_{f}"] = [s / n for s in sums[f]]
    return result


def column(sweep: dict, kind: str, amount: float) -> dict:
    """The sweep's numbers at one value of one change: {field: number}."""
    k = sweep[f"{kind}_values"].index(float(amount))
    return {f: sweep[f"{kind}_{f}"][k] for f in FIELDS}


def _then(said: str, more: str) -> str:
    """Two sentences one after the other, as the language writes them: a space between them in
    English, none after a Chinese or Japanese full stop."""
    # i18n: two sentences in a row; Chinese and Japanese write them without a space between
    return t("{said} {more}", said=said, more=more)


def _amount_words(kind: str, amount: float) -> str:
    """The change, as a sentence's opening words: "Moved 4 pixels to the right", "Turned -30 degrees"."""
    if kind == "shift":
        return tn("Moved {n} pixel to the right", "Moved {n} pixels to the right", int(amount))
    return t("Turned {a} degrees", a=int(amount))


def invariance_words(sweep: dict, kind: str, amount: float) -> list[str]:
    """The sentences beside the sweep's charts at one change (`amount` of `kind`, not 0): what the
    CNN keeps, what the winning capsule does, whether its reconstruction follows; each verdict
    decided by the rules from the numbers quoted, which are the charts' numbers."""
    if float(amount) == 0.0:
        return [t("Pick a shift or a turn other than 0 to compare the digit with itself unchanged.")]
    n = sweep["images"]
    c = column(sweep, kind, amount)
    base = column(sweep, kind, 0)
    said = _amount_words(kind, amount)
    cnn = t(
        "{change}, the CNN keeps its answer on {kept:.1f}% of the {n} test images; its class scores move by {scores:.1f}% "
        "of their size and its pooled features by {features:.1f}%.",
        change=said,
        kept=c["cnn_kept"],
        n=n,
        scores=c["cnn_scores"],
        features=c["cnn_features"],
    )
    if rules.nearly_invariant(c["cnn_features"] / 100):
        cnn = _then(cnn, t("Pooling kept its features nearly invariant, as the story says."))
    elif rules.answer_stays(c["cnn_kept"] / 100):
        cnn = _then(
            cnn,
            t(
                "Pooling did not make its features invariant: they change with the input too, and only the answer stays. "
                "What the CNN lacks is not change but a readable pose."
            ),
        )
    else:
        cnn = _then(cnn, t("Pooling did not make its features invariant, and its answer changes too, on more than a tenth of the images."))
    caps = t(
        "The winning capsule keeps its answer on {kept:.1f}%; its length goes from {l0:.2f} to {l1:.2f}, its vector moves by "
        "{vector:.1f}% of its size, turning through {angle:.1f} degrees, and {dims:.1f} of its dimensions move by a slider "
        "step ({step}) or more.",
        kept=c["caps_kept"],
        l0=base["caps_length"],
        l1=c["caps_length"],
        vector=c["caps_vector"],
        angle=c["caps_angle"],
        dims=c["caps_dims"],
        step=rules.DIM_STEP,
    )
    level = rules.bounded_trend(base["caps_length"], c["caps_length"])
    if rules.nearly_invariant(c["caps_vector"] / 100):
        caps = _then(caps, t("The capsule barely changes: here it is nearly invariant, like a pooled feature, not equivariant."))
    elif level == "falls":
        caps = _then(
            caps, t("Not what the story says: its length falls by more than a tenth, so the capsule loses presence too, not only pose.")
        )
    elif level == "rises":
        caps = _then(caps, t("Its length rises by more than a tenth: the change is not in its pose alone."))
    elif not rules.answer_stays(c["caps_kept"] / 100):
        caps = _then(
            caps,
            t(
                "Its length stays on average, but its answer changes on more than a tenth of the images: the change is not in its pose alone."
            ),
        )
    else:
        caps = _then(caps, t("Its presence stays while its pose changes: what the story calls equivariance."))
    share = c["follows"]
    if rules.follows(share / 100):
        rec = t(
            "Its reconstruction is closer to the moved digit than to the digit where it was on {share:.1f}% of the images: "
            "the drawing follows the digit.",
            share=share,
        )
    else:
        rec = t(
            "Its reconstruction is closer to the moved digit than to the digit where it was on only {share:.1f}% of the "
            "images: the drawing does not follow the digit.",
            share=share,
        )
    return [cnn, caps, rec]


@torch.no_grad()
def one_image(caps, cnn, image: np.ndarray, kind: str) -> dict:
    """One digit (H, W) under every value of `kind`: the inputs and reconstructions (V, H, W), the
    winning capsule (V, D) and its length (V,), its angle from the unchanged one (V,), the CNN's
    score for its own unchanged answer (V,) and its pooled features' relative change (%, V)."""
    values = KINDS[kind]
    x = torch.as_tensor(image, dtype=torch.float32).reshape(1, 1, *image.shape[-2:])
    xs = torch.cat([moved(x, kind, a) for a in values])  # (V, 1, H, W)
    f, p = _cnn(cnn, xs)
    v = _capsules(caps, xs)
    zero = values.index(0)
    j = int(v[zero].norm(dim=-1).argmax())
    w = v[:, j]  # (V, D)
    rec = caps.decode(w, j)
    return {
        "values": [float(a) for a in values],
        "inputs": xs[:, 0].numpy(),
        "reconstructions": rec.reshape(len(values), *image.shape[-2:]).numpy(),
        "capsule": j,
        "vectors": w.numpy(),
        "lengths": w.norm(dim=-1).numpy(),
        "angles": _angle(w[zero].expand_as(w), w).numpy(),
        "cnn_answer": int(p[zero].argmax()),
        "cnn_score": p[:, int(p[zero].argmax())].numpy(),
        "cnn_features": (_relative(f[zero].expand_as(f), f) * 100).numpy(),
    }


def one_image_words(view: dict, names, amount: float) -> str:
    """One sentence on the single digit at one value: what its capsule and the CNN did there."""
    k = view["values"].index(float(amount))
    zero = view["values"].index(0.0)
    moves = int((np.abs(view["vectors"][k] - view["vectors"][zero]) >= rules.DIM_STEP).sum())
    return t(
        "On this digit, the {name} capsule's length goes from {l0:.2f} to {l1:.2f} and it turns through {angle:.1f} degrees "
        "({moves} of its {dims} dimensions move by {step} or more); the CNN's score for {cnn_name} goes from {s0:.2f} to "
        "{s1:.2f} and its pooled features move by {features:.1f}% of their size.",
        name=names[view["capsule"]],
        l0=float(view["lengths"][zero]),
        l1=float(view["lengths"][k]),
        angle=float(view["angles"][k]),
        moves=moves,
        dims=view["vectors"].shape[1],
        step=rules.DIM_STEP,
        cnn_name=names[view["cnn_answer"]],
        s0=float(view["cnn_score"][zero]),
        s1=float(view["cnn_score"][k]),
        features=float(view["cnn_features"][k]),
    )


# --- parts in the wrong places -----------------------------------------------------------------------


def agreement(caps, x: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """How well the votes for class j (B,) agree after routing: |sum_i c_ij u_hat_j|i| over
    sum_i c_ij |u_hat_j|i|, 1 when every weighted vote points the same way, near 0 when they cancel. (B,)"""
    u_hat = caps.predictions(x)  # (B, J, I, D)
    c = caps.route(u_hat, record=True).c[-1]  # (B, I, J)
    b = torch.arange(len(j))
    u = u_hat[b, j]  # (B, I, D)
    cj = c[b, :, j].unsqueeze(-1)  # (B, I, 1)
    return (cj * u).sum(1).norm(dim=-1) / (cj * u.norm(dim=-1, keepdim=True)).sum((1, 2)).clamp_min(1e-8)


PART_FIELDS = ("cnn_right", "cnn_score", "caps_right", "caps_length", "agreement")


@torch.no_grad()
def parts_sweep(caps, cnn, images: torch.Tensor, labels: torch.Tensor, batch: int = BATCH) -> dict:
    """The test images both models get right, unchanged ("original") and with their parts moved
    (each of SCHEMES): the CNN's right answers (%) and its mean score for the true class, the
    capsule model's right answers (%), the true class's capsule length and its votes' agreement
    (`agreement`). A dict of names to numbers and lists (one value per "original" + SCHEMES)."""
    names = ("original", *SCHEMES)
    sums = {f: [0.0] * len(names) for f in PART_FIELDS}
    n = 0
    x_all, y_all = as_input_batch(images), labels
    for xb, yb in zip(x_all.split(batch), y_all.split(batch), strict=True):
        _, p = _cnn(cnn, xb)
        v = _capsules(caps, xb)
        both = (p.argmax(1) == yb) & (v.norm(dim=-1).argmax(1) == yb)
        xb, yb = xb[both], yb[both]
        if not len(yb):
            continue
        n += len(yb)
        b = torch.arange(len(yb))
        for k, name in enumerate(names):
            xs = xb if name == "original" else scrambled(xb, name)
            _, p = _cnn(cnn, xs)
            v = _capsules(caps, xs)
            lengths = v.norm(dim=-1)
            sums["cnn_right"][k] += float((p.argmax(1) == yb).sum()) * 100
            sums["cnn_score"][k] += float(p[b, yb].sum())
            sums["caps_right"][k] += float((lengths.argmax(1) == yb).sum()) * 100
            sums["caps_length"][k] += float(lengths[b, yb].sum())
            sums["agreement"][k] += float(agreement(caps, xs, yb).sum())
    result: dict = {"images": len(x_all), "both_right": n}
    for f in PART_FIELDS:
        result[f] = [s / max(n, 1) for s in sums[f]]
    return result


def parts_words(sweep: dict, scheme: str) -> list[str]:
    """Two sentences on one scheme: who still names the true class (and whether capsules are
    more sensitive to the arrangement, beyond chance), and how the scores fall."""
    k = 1 + SCHEMES.index(scheme)
    n = sweep["both_right"]
    cnn, caps = sweep["cnn_right"][k], sweep["caps_right"][k]
    said = t(
        "With the {scheme}, the CNN still names the true class on {cnn:.1f}% of the {n} test images both models get right "
        "unchanged, the capsule network on {caps:.1f}%.",
        scheme=t(SCHEME_NAMES[scheme]),
        cnn=cnn,
        n=n,
        caps=caps,
    )
    band = rules.noise(cnn, n, caps, n)
    if not rules.beyond_chance(cnn, n, caps, n):
        said = _then(
            said,
            t(
                "The gap is within chance (±{band:.1f} points): capsules are not more sensitive to where the parts are than the CNN here.",
                band=band,
            ),
        )
    elif caps < cnn:
        said = _then(
            said,
            t(
                "Capsules are more sensitive to where the parts are: they give up the true class more often, a gap beyond "
                "chance (±{band:.1f} points).",
                band=band,
            ),
        )
    else:
        said = _then(
            said,
            t(
                "Capsules are less sensitive to where the parts are than the CNN here, a gap beyond chance (±{band:.1f} "
                "points): on this measurement the story's scrambled face fools the capsules more, not less.",
                band=band,
            ),
        )
    scores = t(
        "The CNN's score for the true class goes from {c0:.2f} to {c1:.2f}; the capsule's length from {l0:.2f} to {l1:.2f}, "
        "and its votes' agreement from {a0:.2f} to {a1:.2f}.",
        c0=sweep["cnn_score"][0],
        c1=sweep["cnn_score"][k],
        l0=sweep["caps_length"][0],
        l1=sweep["caps_length"][k],
        a0=sweep["agreement"][0],
        a1=sweep["agreement"][k],
    )
    return [said, scores]


@torch.no_grad()
def parts_views(caps, cnn, image: np.ndarray, names) -> tuple[list[np.ndarray], list[str]]:
    """One digit unchanged and with its parts moved (each of SCHEMES), each with two caption
    lines: what the CNN answers (with its score) and what the capsules answer (with the length)."""
    x = torch.as_tensor(image, dtype=torch.float32).reshape(1, 1, *image.shape[-2:])
    xs = torch.cat([x, *(scrambled(x, s) for s in SCHEMES)])  # (1 + schemes, 1, H, W)
    _, p = _cnn(cnn, xs)
    lengths = _capsules(caps, xs).norm(dim=-1)
    heads = [t("original")] + [t(SCHEME_NAMES[s]) for s in SCHEMES]
    captions = []
    for k, head in enumerate(heads):
        i, j = int(p[k].argmax()), int(lengths[k].argmax())
        cnn_says = t("CNN: {name} ({score:.2f})", name=names[i], score=float(p[k, i]))
        caps_says = t("Capsules: {name} ({length:.2f})", name=names[j], length=float(lengths[k, j]))
        captions.append("\n".join([head, cnn_says, caps_says]))
    return [a[0].numpy() for a in xs], captions


CHAPTER_WORDS = (
    N_("invariance"),
    N_("equivariance"),
    N_("pooling"),
    N_("pose"),
    N_("inverse graphics"),
    N_("viewpoint"),
    N_("coordinate addition"),
    N_("parse tree"),
)


def chapter_words() -> list[tuple[str, str]]:
    """The chapter's words in the order it meets them: (as the reader's language says it, the
    glossary entry's English name, which the glossary's search finds)."""
    return [(t(word), word) for word in CHAPTER_WORDS]


# --- pose: inverse graphics --------------------------------------------------------------------------


def pose_words() -> list[str]:
    """The short step on inverse graphics that leads to the explorer."""
    return [
        t(
            "Rendering turns a description (what is there, at which position, size, slant and thickness) into pixels. A "
            "capsule network is asked to run it backwards: inverse graphics. The winning capsule's 16 numbers are that "
            "description, and the decoder draws from them alone."
        ),
        t(
            "In the explorer, each slider moves one of the 16 numbers: watch which change the drawing (that is the pose) "
            "and which draw almost nothing (the explorer says which)."
        ),
    ]


# --- matrix capsules under a change of viewpoint ----------------------------------------------------


def class_votes(matrix, x: torch.Tensor, coordinates: bool = True):
    """The class layer's votes of a matrix-capsule model, routed: (votes (B, I, J, 16), weights
    (B, I, J): each vote's final assignment R times its capsule's activation, activations (B, J)).
    `coordinates` False routes the same weights' votes without coordinate addition (a model
    trained without it has none to add)."""
    h = F.relu(matrix.conv1(x))  # (B, A, H, W)
    pose, a = matrix.primary(h)
    pose, a, _ = matrix.convcaps1(pose, a)
    pose, a, _ = matrix.convcaps2(pose, a)
    cc = matrix.classcaps
    B, H, W, T, _ = pose.shape
    votes = torch.einsum("bhwtxy,tjyz->bhwtjxz", pose.view(B, H, W, T, 4, 4), cc.W).flatten(-2)  # (B, H, W, T, J, 16)
    if coordinates and cc.coords is not None:
        votes = votes + cc.coords.view(H, W, 1, 1, 16)
    votes = votes.reshape(B, H * W * T, -1, 16)  # (B, I, J, 16)
    a_in = a.reshape(B, H * W * T)  # (B, I)
    res = em_routing(votes, a_in, cc.iterations, cc.beta_u, cc.beta_a, final_lambda=cc.final_lambda, record=True)
    weights = res.R[-1] * a_in.unsqueeze(-1)  # (B, I, J)
    return votes, weights, res.a


def _cloud(votes: torch.Tensor, weights: torch.Tensor, j: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The weighted mean (B, 16) and spread (B,) of the votes for class j (B,): the spread is the
    root mean square distance of the votes from their mean, each vote weighted."""
    b = torch.arange(len(j))
    V = votes[b, :, j]  # (B, I, 16)
    w = weights[b, :, j].unsqueeze(-1)  # (B, I, 1)
    total = w.sum(1).clamp_min(1e-12)  # (B, 1)
    mu = (w * V).sum(1) / total  # (B, 16)
    spread = ((w * (V - mu.unsqueeze(1)).pow(2)).sum((1, 2)) / total.squeeze(1)).sqrt()  # (B,)
    return mu, spread


POSITION = (3, 7)  # the vote entries coordinate addition adds the receptive field's row and column to


@torch.no_grad()
def viewpoint_sweep(matrix, images: torch.Tensor, batch: int = BATCH) -> dict:
    """For every change of KINDS: the winning class's votes (the model's answer on the unchanged
    image) and how they move, as means over the images: their mean's move, their spread before
    and after; with and without coordinate addition on the same weights, the answer kept against
    the unchanged image (%) and how far the mean's two position entries move. Without
    coordinate addition at 0, the share of images whose answer is the one with it (%)."""
    x_all = as_input_batch(images)
    n = len(x_all)
    result: dict = {"images": n, "coordinates": int(matrix.classcaps.coords is not None)}
    same = 0.0
    for kind, values in KINDS.items():
        f = ("mean_move", "spread_before", "spread_after", "kept", "position_move", "kept_plain", "position_move_plain")
        sums = {k: [0.0] * len(values) for k in f}
        for xb in x_all.split(batch):
            V0, w0, a0 = class_votes(matrix, xb)
            P0, q0, b0 = class_votes(matrix, xb, coordinates=False)
            j, jp = a0.argmax(1), b0.argmax(1)
            if kind == "shift":
                same += float((j == jp).sum()) * 100
            mu0, s0 = _cloud(V0, w0, j)
            nu0, _ = _cloud(P0, q0, jp)
            for k, amount in enumerate(values):
                xm = moved(xb, kind, amount)
                V1, w1, a1 = class_votes(matrix, xm)
                P1, q1, b1 = class_votes(matrix, xm, coordinates=False)
                mu1, s1 = _cloud(V1, w1, j)
                nu1, _ = _cloud(P1, q1, jp)
                sums["mean_move"][k] += float((mu1 - mu0).norm(dim=1).sum())
                sums["spread_before"][k] += float(s0.sum())
                sums["spread_after"][k] += float(s1.sum())
                sums["kept"][k] += float((a1.argmax(1) == j).sum()) * 100
                sums["position_move"][k] += float((mu1 - mu0)[:, POSITION].norm(dim=1).sum())
                sums["kept_plain"][k] += float((b1.argmax(1) == jp).sum()) * 100
                sums["position_move_plain"][k] += float((nu1 - nu0)[:, POSITION].norm(dim=1).sum())
        result[f"{kind}_values"] = [float(v) for v in values]
        for k in f:
            result[f"{kind}_{k}"] = [s / n for s in sums[k]]
    result["same_answer"] = same / n
    return result


def viewpoint_words(sweep: dict, kind: str, amount: float) -> list[str]:
    """The sentences beside the votes' charts at one change (not 0): whether the votes move
    together (rules.moves_together) and what coordinate addition adds, with and without it."""
    if float(amount) == 0.0:
        return [t("Pick a shift or a turn other than 0 to see the votes move.")]
    k = sweep[f"{kind}_values"].index(float(amount))
    move, s0, s1 = sweep[f"{kind}_mean_move"][k], sweep[f"{kind}_spread_before"][k], sweep[f"{kind}_spread_after"][k]
    said = t(
        "{change}, the mean of the winning class's votes moves by {move:.3f} while their spread goes from {s0:.3f} to "
        "{s1:.3f} (averages over {n} test images).",
        change=_amount_words(kind, amount),
        move=move,
        s0=s0,
        s1=s1,
        n=sweep["images"],
    )
    if rules.moves_together(move, s0, s1):
        said = _then(said, t("The votes move together: the cloud travels without scattering, so their agreement survives the change."))
    elif rules.trend(s0, s1) != "stays about level":
        said = _then(
            said,
            t(
                "The votes do not move together: their spread changes by more than a tenth, so the change of viewpoint "
                "scatters (or gathers) them, not only moves them."
            ),
        )
    else:
        said = _then(
            said,
            t(
                "Their spread stays, but their mean moves by less than a tenth of it: the votes barely move, so the pose "
                "carries little of this change."
            ),
        )
    if not sweep["coordinates"]:
        return [said, t("This model was trained without coordinate addition: its votes carry no position of their own.")]
    coords = t(
        "Coordinate addition adds to each vote the scaled row and column of its receptive field's centre. With it, the "
        "mean pose's two position entries move by {with_:.3f}; without it, on the same weights, by {without:.3f}. Without "
        "it the model keeps its answer on {kept_plain:.1f}% of the moved images, against {kept:.1f}% with it, and unchanged "
        "it gives the same answer as with it on {same:.1f}%.",
        with_=sweep[f"{kind}_position_move"][k],
        without=sweep[f"{kind}_position_move_plain"][k],
        kept_plain=sweep[f"{kind}_kept_plain"][k],
        kept=sweep[f"{kind}_kept"][k],
        same=sweep["same_answer"],
    )
    with_, without = sweep[f"{kind}_position_move"][k], sweep[f"{kind}_position_move_plain"][k]
    if rules.trend(without, with_) == "stays about level":
        coords = _then(
            coords,
            t(
                "On this model coordinate addition makes little difference here: the position moves about as much without it (within a tenth)."
            ),
        )
    elif with_ > without:
        coords = _then(coords, t("With coordinate addition the mean pose follows the position more: its position entries move further."))
    else:
        coords = _then(coords, t("With coordinate addition the position entries move less than without it, not more."))
    return [said, coords]


@torch.no_grad()
def one_image_votes(matrix, image: np.ndarray, kind: str, amount: float) -> dict:
    """One digit unchanged and changed: the winning class's votes' two position entries (I, 2)
    each, their weights (I,), with and without coordinate addition, and the class."""
    x = torch.as_tensor(image, dtype=torch.float32).reshape(1, 1, *image.shape[-2:])
    out: dict = {}
    for coordinates in (True, False):
        V0, w0, a0 = class_votes(matrix, x, coordinates)
        j = int(a0[0].argmax())
        V1, w1, _ = class_votes(matrix, moved(x, kind, amount), coordinates)
        tag = "with" if coordinates else "without"
        out[tag] = {
            "class": j,
            "before": V0[0, :, j][:, POSITION].numpy(),
            "after": V1[0, :, j][:, POSITION].numpy(),
            "w_before": w0[0, :, j].numpy(),
            "w_after": w1[0, :, j].numpy(),
        }
    return out


# --- what the chapter shows, and its sweeps kept on disk -------------------------------------------


def vector_fits(meta) -> bool:
    """Whether a checkpoint is a vector-capsule model the chapter can show: class capsules with a
    decoder (the reconstruction following the digit) on single 28x28 digits or clothes."""
    cfg = meta.config
    return cfg.family in ("capsnet", "efficient") and bool(getattr(cfg, "reconstruction", False)) and cfg.in_size == 28


def matrix_fits(meta) -> bool:
    """Whether a checkpoint is a matrix-capsule model on 28x28 single images."""
    return meta.config.family == "matrix" and meta.config.in_size == 28


def baseline_for(meta, listing) -> Path | None:
    """The baseline CNN to set beside a capsule model: the first CNN in `listing` ((path, meta)
    pairs; a meta may be an error string) trained on the same images at the same size, else None."""
    for path, other in listing:
        if isinstance(other, str) or other.config.family != "cnn":
            continue
        if other.image_dataset == meta.image_dataset and other.config.in_size == meta.config.in_size:
            return path
    return None


SWEEP_VERSION = 1  # raised whenever a sweep measures differently: stored results of an older one are not read


def _settings(dataset: str, n: int, cnn_path: Path | None = None) -> dict:
    settings = {
        "version": SWEEP_VERSION,
        "dataset": dataset,
        "images": int(n),
        "shifts": list(SHIFTS),
        "angles": list(ANGLES),
        "step": rules.DIM_STEP,
    }
    if cnn_path is not None:
        settings["cnn"] = stored.file_digest(cnn_path)
    return settings


def kept_sweep(kind: str, path: Path, model, data, n: int = WHY_IMAGES, cnn_path: Path | None = None, cnn=None) -> dict:
    """A sweep of the chapter ("invariance", "parts" or "viewpoint") of the model in `path` (and
    the CNN in `cnn_path`) on the first `n` images of the test set `data`: read from disk where a
    run with these files and settings is stored (shipped ones in checkpoints/sweeps), else run
    and stored."""
    n = min(n, len(data))
    key = stored.sweep_key(path, f"why-{kind}", _settings(data.name, n, cnn_path))
    return stored.remembered(key, lambda: _run(kind, model, cnn, data.images[:n], data.labels[:n]))[0]


def _run(kind: str, model, cnn, images: torch.Tensor, labels: torch.Tensor) -> dict:
    if kind == "invariance":
        return invariance_sweep(model, cnn, images)
    if kind == "parts":
        return parts_sweep(model, cnn, images, labels)
    return viewpoint_sweep(model, images)


def precompute(folder: Path, out: Path, data_dir=None, n: int = WHY_IMAGES, only=None) -> list[str]:
    """The chapter's sweeps for every model in `folder` it can show, stored in `out`: what
    `python -m capsviz.analysis.why` ships in checkpoints/sweeps."""
    import sys
    import time

    from capsviz.checkpoint import list_checkpoints, load_checkpoint
    from capsviz.data import load_split

    listing = list_checkpoints(folder)
    done = []
    for path, meta in listing:
        if isinstance(meta, str) or not (vector_fits(meta) or matrix_fits(meta)) or (only and path.stem not in only):
            continue
        model, _ = load_checkpoint(path)
        model.eval()
        data = load_split(meta.image_dataset, "test", data_dir)
        start = time.perf_counter()
        if matrix_fits(meta):
            jobs = {"viewpoint": (None, None)}
        else:
            cnn_path = baseline_for(meta, listing)
            if cnn_path is None:
                continue
            cnn = load_checkpoint(cnn_path)[0].eval()
            jobs = {"invariance": (cnn_path, cnn), "parts": (cnn_path, cnn)}
        for kind, (cnn_path, cnn) in jobs.items():
            key = stored.sweep_key(path, f"why-{kind}", _settings(data.name, min(n, len(data)), cnn_path))
            if stored.read(key, [out]) is None:
                stored.write(key, _run(kind, model, cnn, data.images[:n], data.labels[:n]), out)
            done.append(key)
        print(f"{path.name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return done


def report(folder: Path, data_dir=None, n: int = WHY_IMAGES) -> list[str]:
    """The chapter's sentences for every model in `folder` whose sweeps are stored, at the largest
    shift and turns and for every scheme: the numbers RESULTS.md and the README quote."""
    from capsviz.checkpoint import list_checkpoints

    listing = list_checkpoints(folder)
    lines = []
    for path, meta in listing:
        if isinstance(meta, str):
            continue
        cnn_path = baseline_for(meta, listing) if vector_fits(meta) else None
        kinds = ["invariance", "parts"] if cnn_path is not None else ["viewpoint"] if matrix_fits(meta) else []
        for kind in kinds:
            got = stored.read(stored.sweep_key(path, f"why-{kind}", _settings(meta.image_dataset, n, cnn_path)))
            if got is None:
                continue
            lines.append(f"== {path.stem} ({kind}, {got['images']} test images)")
            if kind == "parts":
                lines += [s for scheme in SCHEMES for s in parts_words(got, scheme)]
            else:
                say = invariance_words if kind == "invariance" else viewpoint_words
                lines += [s for change, a in (("shift", 4), ("rotate", -30), ("rotate", 30)) for s in say(got, change, a)]
    return lines


if __name__ == "__main__":
    import argparse

    from capsviz.paths import shipped_checkpoints

    parser = argparse.ArgumentParser(description="Store the sweeps of the chapter on why capsules for the shipped models.")
    parser.add_argument("--only", nargs="*", default=None, help="model file stems to run (default: every one that fits)")
    parser.add_argument("--say", action="store_true", help="print the sentences of the stored sweeps instead of running any")
    args = parser.parse_args()
    if args.say:
        print("\n".join(report(shipped_checkpoints())))
    else:
        names = precompute(shipped_checkpoints(), stored.shipped_folder(), only=args.only)
        print(f"{len(names)} results in {stored.shipped_folder()}")
