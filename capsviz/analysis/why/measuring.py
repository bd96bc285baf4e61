"""The chapter's measurements: a capsule model and the baseline CNN on the changed test images
(`invariance_sweep`, `parts_sweep`), a matrix-capsule model's votes under a change of viewpoint
(`viewpoint_sweep`), and the same on one image for the single-image views."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from capsviz.analysis import as_input_batch, rules
from capsviz.analysis.why.changes import KINDS, SCHEME_NAMES, SCHEMES, moved, scrambled
from capsviz.i18n import t
from capsviz.routing import em_routing

BATCH = 100  # images per forward pass: a CapsNet's predictions for 100 images are about 74 MB


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


def vote_agreement(caps, x: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
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
            sums["agreement"][k] += float(vote_agreement(caps, xs, yb).sum())
    result: dict = {"images": len(x_all), "both_right": n}
    for f in PART_FIELDS:
        result[f] = [s / max(n, 1) for s in sums[f]]
    return result


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
