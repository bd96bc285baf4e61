"""MultiMNIST analyses (Sabour et al. 6.1-6.2, Fig. 5): compose a pair, classify it by the two most
active capsules, reconstruct one capsule at a time, and segment the input by which reconstruction
claims each pixel (the paper aims at each explained once; segment_words says how far that holds);
accuracy over generated test pairs with the hardest cases."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from capsviz.analysis import as_batch, rules
from capsviz.data import multimnist
from capsviz.i18n import N_, gap, t

INK_LEVEL = 0.1  # a pixel counts as drawn (input) or explained (reconstruction) above this grey level

# Segmentation labels per pixel
BACKGROUND, UNEXPLAINED, FIRST, SECOND, BOTH = 0, 1, 2, 3, 4
SEGMENT_NAMES = {BACKGROUND: "background", UNEXPLAINED: "ink no capsule explains", FIRST: "first", SECOND: "second", BOTH: "both"}
# The segmentation legend's words, t(...) where shown: {first}, {second} the capsules redrawn.
SEGMENT_LEGEND = {
    UNEXPLAINED: N_("ink no capsule explains"),
    FIRST: N_("capsule {first}"),
    SECOND: N_("capsule {second}"),
    BOTH: N_("both"),
}


@dataclass
class Pair:
    image: np.ndarray  # (36, 36) the overlay in [0, 1]
    parts: np.ndarray  # (2, 36, 36) the two shifted digits
    labels: tuple[int, int]


def compose_pair(images: torch.Tensor, labels: torch.Tensor, first: int, second: int, shifts) -> Pair:
    """Overlay test digits `first` and `second` (indices into images (N, 28, 28) uint8), each shifted
    by its (dy, dx) in [-4, 4]: shifts ((dy1, dx1), (dy2, dx2))."""
    s = torch.as_tensor(shifts, dtype=torch.long).clamp(-multimnist.MAX_SHIFT, multimnist.MAX_SHIFT).view(1, 2, 2)
    b = multimnist.compose(images, labels, torch.tensor([[first, second]]), s)
    return Pair(b.images[0].numpy(), b.parts[0].numpy(), (int(b.labels[0, 0]), int(b.labels[0, 1])))


def draw_pair(labels: torch.Tensor, seed: int) -> tuple[int, int, list[list[int]]]:
    """(first, second, shifts) drawn by the paper's rule: the second digit of a different class,
    shifts within 4 px; compose with `compose_pair`."""
    g = torch.Generator().manual_seed(seed)
    index = multimnist.sample_pairs(labels, 1, g)[0]
    return int(index[0]), int(index[1]), multimnist.random_shifts(1, g)[0].tolist()


@dataclass
class Segmentation:
    scores: np.ndarray  # (J,) capsule lengths
    top2: tuple[int, int]  # the two most active capsules: the prediction
    capsules: tuple[int, ...]  # the capsules reconstructed (the top 2 unless chosen)
    reconstructions: np.ndarray  # (len(capsules), H, W), each decoded from its capsule alone
    segments: np.ndarray  # (H, W) int: BACKGROUND, UNEXPLAINED, FIRST, SECOND or BOTH (first two capsules)


@torch.no_grad()
def segment(model, image: np.ndarray, capsules: tuple[int, ...] | None = None) -> Segmentation:
    """Classify a pair and reconstruct each of `capsules` (default: the two most active) on its own.

    Each ink pixel of the input is assigned to the first and/or second reconstructed digit where that
    digit's reconstruction is non-zero (above INK_LEVEL), as the paper segments; ink neither explains is
    UNEXPLAINED, and pixels without ink are BACKGROUND."""
    out = model(as_batch(image), reconstruct=False)
    scores = out.scores[0].float()
    top2 = tuple(int(j) for j in scores.topk(2).indices)
    chosen = tuple(top2 if capsules is None else capsules)
    v = out.capsules[0, list(chosen)]  # (k, D)
    recs = model.decode(v, torch.tensor(chosen)).numpy()  # (k, H, W)
    segs = np.full(image.shape, BACKGROUND, np.int64)
    ink = image > INK_LEVEL
    first = recs[0] > INK_LEVEL
    second = recs[1] > INK_LEVEL if len(recs) > 1 else np.zeros_like(first)
    segs[ink] = UNEXPLAINED
    segs[ink & first] = FIRST
    segs[ink & second] = SECOND
    segs[ink & first & second] = BOTH
    return Segmentation(scores.numpy(), top2, chosen, recs, segs)


def intro_words(size: int, max_shift: int) -> str:
    """The MultiMNIST page's opening: what it shows, and Fig. 5's idea as the paper's aim, not as a
    promise: the segmentation below measures how far it holds for the model (segment_words)."""
    return t(
        "Two test digits of different classes, each shifted up to {max_shift} pixels, overlap on a {size}x{size} canvas. "
        "The prediction is the **two longest capsules**; the decoder then redraws each chosen capsule **on its own**, "
        "in red and green over the input (yellow where both claim a pixel). This is Fig. 5 of Sabour et al., whose aim "
        "is that routing explains each pixel once: each part goes to one digit, so a capsule for a digit that is not "
        "there (neither a label nor predicted) should find little to draw. Below, the page measures how far that "
        "holds here: how many ink pixels both redrawn digits claim, and how much routing moves the couplings.",
        max_shift=max_shift,
        size=size,
    )


def segment_counts(segments: np.ndarray) -> dict[str, int]:
    """Ink pixels of a segmentation (H, W) by whom they are claimed: 'ink' all of them, 'first',
    'second' (one capsule only), 'both', 'none'."""
    n = {k: int((segments == k).sum()) for k in (UNEXPLAINED, FIRST, SECOND, BOTH)}
    return {"ink": sum(n.values()), "first": n[FIRST], "second": n[SECOND], "both": n[BOTH], "none": n[UNEXPLAINED]}


def segment_words(segments: np.ndarray, first: str, second: str, parts: np.ndarray | None = None) -> str:
    """The caption under a segmentation, with `first` and `second` the two capsules redrawn: how a
    pixel is assigned (above INK_LEVEL, the paper's 'non-zero'), then the measured counts against the
    paper's aim of each pixel explained once. With the pair's two digits (`parts`, (2, H, W)), a
    pixel claimed by both where both digits really have ink counts as rightly claimed twice; the aim
    is met only when no other ink pixel is claimed by both."""
    n = segment_counts(segments)
    said = t(
        "A pixel of the input's ink belongs to a capsule where that capsule's reconstruction is above {level} (the paper: "
        "'non-zero'). Measured here: of the {ink} ink pixels, capsule {first} alone claims {n_first}, capsule {second} alone "
        "{n_second}, both {both} and neither {none}",
        level=f"{INK_LEVEL:g}",
        ink=n["ink"],
        first=first,
        n_first=n["first"],
        second=second,
        n_second=n["second"],
        both=n["both"],
        none=n["none"],
    )
    if n["ink"] == 0:
        return said + "."
    crossing = 0 if parts is None else int(((segments == BOTH) & (parts[0] > INK_LEVEL) & (parts[1] > INK_LEVEL)).sum())
    twice = n["both"] - crossing
    if parts is not None and crossing:
        said += gap() + t(
            "(on {crossing} of those {both} the two digits' own strokes cross, where both claims are right)",
            crossing=crossing,
            both=n["both"],
        )
    if twice == 0:
        return said + t(": no other ink pixel is claimed twice, so here each pixel is explained once, as the paper aims.")
    v = dict(twice=twice, ink=n["ink"], share=f"{twice / n['ink']:.0%}")
    if parts is not None:
        return said + t(
            ": {twice} of {ink} ink pixels ({share}) are explained by both where only one digit has ink, not once as the paper "
            "aims. Try a capsule that is neither a label nor predicted and count what it claims.",
            **v,
        )
    return said + t(
        ": {twice} of {ink} ink pixels ({share}) are explained by both, not once as the paper aims. Try a capsule that is "
        "neither a label nor predicted and count what it claims.",
        **v,
    )


@dataclass
class PairAccuracy:
    accuracy: float  # % of pairs whose two labels are the two most active capsules
    n: int
    hardest: list[dict]  # the pairs with the smallest margin (wrong ones first): index, shifts, labels, top2, margin
    right: int = 0  # pairs right

    @property
    def error(self) -> float:
        """The pair error (%): the share of pairs not read whole, the zoo card's measure."""
        return 100.0 - self.accuracy

    def words(self) -> str:
        """The metric's accuracy and pair error with what they were measured on."""
        return t(
            "{right} of {n} test pairs right ({accuracy}%; pair error {error}%): a pair is right when its two labels are the "
            "two longest capsules.",
            right=f"{self.right:,}",
            n=f"{self.n:,}",
            accuracy=f"{self.accuracy:.2f}",
            error=f"{self.error:.2f}",
        )


def stored_pair_error(meta) -> tuple[float, int] | None:
    """(pair error %, pairs) a model's checkpoint stores, the figure its zoo card quotes; None for a
    model that does not read two labels at once or was not measured."""
    from capsviz.analysis.zoo import guesses

    m = meta.metrics
    if guesses(meta)[1] != 2 or not m.measured or not m.n_test:
        return None
    return m.test_error, m.n_test


def stored_words(res: PairAccuracy, stored: tuple[float, int] | None) -> str:
    """The pair error just measured against the one stored for the model (`stored_pair_error`): whether
    the gap is more than a different set of pairs alone could give (rules.beyond_chance)."""
    if stored is None:
        return t("No pair error is stored with this model (its zoo card says not measured), so there is nothing to set this one against.")
    error, n = stored
    gap, band = abs(res.error - error), rules.noise(res.error, res.n, error, n)
    v = dict(error=f"{res.error:.2f}", n=f"{res.n:,}", stored=f"{error:.2f}", stored_n=f"{n:,}", gap=f"{gap:.2f}", band=f"{band:.2f}")
    if rules.beyond_chance(res.error, res.n, error, n):
        return t(
            "Pair error {error}% on these {n} pairs against the {stored}% stored with this model on {stored_n} pairs (its zoo "
            "card's figure): a gap of {gap} points, more than the ±{band} points chance gives (two standard errors of the "
            "difference): beyond chance.",
            **v,
        )
    return t(
        "Pair error {error}% on these {n} pairs against the {stored}% stored with this model on {stored_n} pairs (its zoo "
        "card's figure): a gap of {gap} points, within the ±{band} points chance gives (two standard errors of the "
        "difference): within chance, as far as {n} pairs can tell.",
        **v,
    )


@torch.no_grad()
def pair_accuracy(
    model,
    images: torch.Tensor,
    labels: torch.Tensor,
    n: int,
    *,
    seed: int = 0,
    batch_size: int = 128,
    keep: int = 8,
    on_progress: Callable[[int, int], None] | None = None,
) -> PairAccuracy:
    """Accuracy on the first `n` fixed evaluation pairs (the paper's rule: both labels among the two
    most active capsules). The hardest: wrong pairs, then the smallest gap between the second and
    third longest capsules (the model was least sure a second digit is there)."""
    index, shifts = multimnist.MultiMNIST(images, labels).eval_set(pairs_per_digit=1, seed=seed, limit=n)
    n = len(index)
    right = 0
    margins, wrong, top2s = [], [], []
    for i in range(0, n, batch_size):
        b = multimnist.compose(images, labels, index[i : i + batch_size], shifts[i : i + batch_size])
        scores = model(b.images.unsqueeze(1), reconstruct=False).scores.float()  # (B, J)
        top = scores.topk(3, dim=1)
        top2 = top.indices[:, :2]
        ok = (top2.sort(1).values == b.labels.sort(1).values).all(1)
        right += int(ok.sum())
        wrong.append(~ok)
        margins.append(top.values[:, 1] - top.values[:, 2])
        top2s.append(top2)
        if on_progress:
            on_progress(min(i + batch_size, n), n)
    wrong, margins, top2s = torch.cat(wrong), torch.cat(margins), torch.cat(top2s)
    order = torch.argsort(margins - 10.0 * wrong.float())[:keep]  # wrong ones first, then least sure
    hardest = [
        {
            "index": index[k].tolist(),
            "shifts": shifts[k].tolist(),
            "labels": labels[index[k]].tolist(),
            "top2": top2s[k].tolist(),
            "margin": float(margins[k]),
            "correct": not bool(wrong[k]),
        }
        for k in order.tolist()
    ]
    return PairAccuracy(100.0 * right / max(n, 1), n, hardest, right)


def ink_under(image: np.ndarray, pos: int, grid: int) -> float:
    """The share of the pixels a grid x grid map's square `pos` (row by row) covers when stretched over
    `image` (H, W) that are ink (above INK_LEVEL). The coupling figures stretch the map over the input; a
    pixel belongs to the square whose centre is nearest to it."""
    H, W = image.shape[-2:]
    rows = np.floor((np.arange(H) + 0.5) * grid / H).astype(int) == pos // grid
    cols = np.floor((np.arange(W) + 0.5) * grid / W).astype(int) == pos % grid
    under = np.asarray(image)[np.ix_(rows, cols)]
    return float((under > INK_LEVEL).mean()) if under.size else 0.0
