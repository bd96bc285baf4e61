"""What the EM routing page says in words: zoom limits that are the ones stated, the order of the
histogram panels, how the assignments R split and how far the votes sit from their means, each
from the numbers its figures draw."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capsviz.analysis import rules
from capsviz.analysis.explain.shared import round_up
from capsviz.analysis.routing import EMTrace
from capsviz.analysis.rule_words import trend_words
from capsviz.i18n import gap, t

PAPER_ZOOM = 0.05  # Fig. 2 of Hinton et al. zooms to vote distances below 0.05 (their smallNORB model)


MIN_SHARE_IN_ZOOM = 0.01  # the paper's zoom is used when it holds at least 1% of the votes


NEAREST = 10  # else the zoom holds the nearest 10% of the votes (percent)


FULL = 99  # the full view holds the nearest 99%: a few far votes would squeeze every bar to the left


@dataclass
class Zoom:
    limit: float  # histograms cover distances in [0, limit]: the number the page states
    share: float  # fraction of all votes (every iteration and class) within the limit
    why: str  # one sentence: where the limit comes from


def zoom_limit(distances: np.ndarray, zoom: bool) -> Zoom:
    """The distance range of the vote histograms, rounded so that the stated number is the one
    used. Zoomed: the paper's 0.05 where it holds at least 1% of the votes, else the nearest 10%
    (rounded up); not zoomed: the nearest 99%."""
    d = np.asarray(distances, dtype=np.float64).ravel()
    if zoom:
        paper = float((d <= PAPER_ZOOM).mean())
        if paper >= MIN_SHARE_IN_ZOOM:
            return Zoom(PAPER_ZOOM, paper, t("the paper's zoom (Fig. 2): {share} of the votes lie this close", share=f"{paper:.0%}"))
        limit = round_up(float(np.percentile(d, NEAREST)))
        share = float((d <= limit).mean())
        if paper == 0:
            why = t(
                "none of this model's votes lie within the paper's 0.05 (it suits the paper's smallNORB model), so the zoom "
                "shows the nearest {share} instead",
                share=f"{share:.0%}",
            )
        else:
            why = t(
                "only {paper} of this model's votes lie within the paper's 0.05 (it suits the paper's smallNORB model), so the "
                "zoom shows the nearest {share} instead",
                paper=f"{paper:.1%}",
                share=f"{share:.0%}",
            )
        return Zoom(limit, share, why)
    limit = round_up(float(np.percentile(d, FULL)))
    share = float((d <= limit).mean())
    return Zoom(
        limit, share, t("the nearest {share} of the votes; the farthest few are left out so the bars stay readable", share=f"{share:.0%}")
    )


def panel_order(a_final: np.ndarray) -> list[int]:
    """Class capsules by final activation, the winner first: the small multiples' order."""
    return [int(j) for j in np.argsort(-np.asarray(a_final), kind="stable")]


@dataclass
class EMShares:
    """How the assignments gather on the winning class capsule, per iteration (T,)."""

    winner: int
    share: np.ndarray  # the winner's share of all assignment sum_i R_ij / I (uniform: 1/J)
    near: np.ndarray  # R-weighted mean vote distance to the winner's mean pose
    near_others: np.ndarray  # the same over the other class capsules together
    uniform: float


def em_shares(trace: EMTrace) -> EMShares:
    T, I, J = trace.R.shape
    w = int(trace.a[-1].argmax())
    mass = trace.R.sum(1)  # (T, J): sum_i R_ij
    others = [j for j in range(J) if j != w]
    near = (trace.R[:, :, w] * trace.distances[:, :, w]).sum(1) / np.maximum(mass[:, w], 1e-12)
    Ro, Do = trace.R[:, :, others], trace.distances[:, :, others]
    near_others = (Ro * Do).sum((1, 2)) / np.maximum(Ro.sum((1, 2)), 1e-12)
    return EMShares(w, mass[:, w] / I, near, near_others, 1.0 / J)


def distance_words(trace: EMTrace) -> str:
    """What a vote distance is measured in (em_trace's distances), for the page beside the histograms."""
    D = trace.mu.shape[-1]
    side = round(D**0.5)
    return t(
        "A vote's distance is the straight-line (Euclidean) distance between the vote and the class's mean pose mu, over the "
        "{D} entries of the {side}x{side} pose matrix, in the pose's own raw units: not divided by the spread sigma, so it "
        "has no fixed scale and compares only within one model.",
        D=D,
        side=side,
    )


def verdict_words(predicted: str, label: str, names) -> str:
    """Whether a prediction is right, when the image's label is one of the classes (a test image):
    'right: the label is 7' or 'wrong: the label is 7'; for a drawing or an upload, that no label says."""
    if label not in [str(n) for n in names]:
        return t("no label to check it against")
    if str(label) == str(predicted):
        return t("right: the label is {label}", label=label)
    return t("wrong: the label is {label}", label=label)


def em_share_words(sh: EMShares, name: str, trained: int, label: str | None = None, names=()) -> str:
    """What to look for in the EM histograms, from the numbers em_shares gives the page: the
    winner's share of all assignment (its path over the iterations, rules.path_trend) and how near the votes it
    explains lie, beside the other classes'. With the image's `label` (and the class `names`), it
    says whether the winner, the prediction, is right (verdict_words)."""
    T = len(sh.share)
    first, last = float(sh.share[0]), float(sh.share[-1])
    near, far = float(sh.near[-1]), float(sh.near_others[-1])
    v = dict(near=f"{near:.3g}", far=f"{far:.3g}")
    if near < far:
        votes = t(
            "the votes it explains lie on average {near} from its mean pose, nearer to it than the votes the other classes explain are to theirs ({far})",
            **v,
        )
    elif near > far:
        votes = t(
            "the votes it explains lie on average {near} from its mean pose, farther from it than the votes the other classes explain are to theirs ({far})",
            **v,
        )
    else:
        votes = t(
            "the votes it explains lie on average {near} from its mean pose, as near to it as the votes the other classes explain are to theirs ({far})",
            **v,
        )
    if label is None:
        said = t("What to look for: the winner, class {name}, is the first panel (red).", name=name)
    else:
        said = t(
            "What to look for: the winner, class {name}, is the first panel (red); it is the prediction, {verdict}.",
            name=name,
            verdict=verdict_words(name, label, names),
        )
    if T > 1:
        said += gap() + t(
            "Its share of all assignment {trend}: {first} at iteration 1 (uniform: {uniform}), {last} at iteration {T}; {votes}.",
            trend=trend_words(sh.share, "{:.1%}"),
            first=f"{first:.1%}",
            uniform=f"{sh.uniform:.1%}",
            last=f"{last:.1%}",
            T=T,
            votes=votes,
        )
    else:
        said += gap() + t(
            "Its share of all assignment stays at the uniform {first}, since one iteration re-assigns nothing; {votes}.",
            first=f"{first:.1%}",
            votes=votes,
        )
    if T != trained:
        said += "  \n" + t("This model was trained with {trained} EM iterations; with {T} its answers can differ.", trained=trained, T=T)
    return said


def conv_assignment_words(R: np.ndarray, pos: int, t_: int) -> str:
    """The caption of a convolutional capsule layer's assignment map, from the numbers the map and
    the layer hold at iteration t_ (0-based): R (P, I, J), each output position's assignments of its
    I lower capsules (receptive field slots) to its J upper capsule types; the map draws R[pos]. It
    says what the map shows: every cell equal (the first iteration's even split), or how much of
    each lower capsule's vote this position holds (its column sums) and, when the layer's positions
    show it (rules.trend, the border's mean column sum against the inside's), that positions on
    the grid's border hold larger (or smaller) shares."""
    P, _, J = R.shape
    here = R[pos]
    sums = here.sum(1)  # (I,): each lower capsule's column
    if np.ptp(here) < 1e-6:
        return t(
            "Every cell here is {cell} (1/{J} is {uniform}): at iteration {k} each lower capsule's vote is split evenly over "
            "the {J} upper capsule types at every position it reaches, so each column sums to {sum} at this position.",
            cell=f"{here.flat[0]:.4f}",
            J=J,
            uniform=f"{1 / J:.4f}",
            k=t_ + 1,
            sum=f"{sums[0]:.3f}",
        )
    said = t(
        "At iteration {k} each lower capsule's assignments sum to 1 over every upper capsule it reaches, at all the "
        "positions it feeds, so one position's column holds only part of its vote: here the columns sum to {lo} to {hi} "
        "(mean {mean}).",
        k=t_ + 1,
        lo=f"{sums.min():.3f}",
        hi=f"{sums.max():.3f}",
        mean=f"{sums.mean():.3f}",
    )
    n = round(P**0.5)
    if n < 3:
        return said
    grid = R.sum(2).mean(1).reshape(n, n)  # mean column sum at each position
    inside = float(grid[1:-1, 1:-1].mean())
    border = float((grid.sum() - grid[1:-1, 1:-1].sum()) / (P - (n - 2) ** 2))
    v = dict(n=n, border=f"{border:.3f}", inside=f"{inside:.3f}")
    trend = rules.trend(inside, border)
    if trend == "rises":
        return (
            said
            + gap()
            + t(
                "Over the layer's {n} x {n} positions the mean column sum is {border} on the border and {inside} inside: the shares "
                "are larger at the border, where the lower capsules reach fewer positions.",
                **v,
            )
        )
    if trend == "falls":
        return (
            said
            + gap()
            + t(
                "Over the layer's {n} x {n} positions the mean column sum is {border} on the border and {inside} inside: the shares "
                "are smaller at the border.",
                **v,
            )
        )
    return (
        said
        + gap()
        + t(
            "Over the layer's {n} x {n} positions the mean column sum is {border} on the border and {inside} inside: the shares "
            "are about the same at the border as inside.",
            **v,
        )
    )
