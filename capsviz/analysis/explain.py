"""What the EM, explorer and MultiMNIST pages say in words: zoom limits that are the ones stated,
the order of the histogram panels, grid positions in words, MultiMNIST captions, how far the
couplings of a pair's two winning capsules move from uniform beside a single digit, and how much
each explorer offset changes the drawing (numpy out)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from capsviz.analysis import as_batch, rules
from capsviz.analysis.multimnist import INK, ink_under
from capsviz.analysis.routing import EMTrace, dynamic_trace
from capsviz.registry import routing_words

PAPER_ZOOM = 0.05  # Fig. 2 of Hinton et al. zooms to vote distances below 0.05 (their smallNORB model)
MIN_SHARE_IN_ZOOM = 0.01  # the paper's zoom is used when it holds at least 1% of the votes
NEAREST = 10  # else the zoom holds the nearest 10% of the votes (percent)
FULL = 99  # the full view holds the nearest 99%: a few far votes would squeeze every bar to the left


def round_up(x: float, digits: int = 2) -> float:
    """x rounded up to `digits` significant digits: a limit that reads as it is and holds x."""
    if x <= 0:
        return 0.0
    step = 10.0 ** (np.floor(np.log10(x)) - digits + 1)
    return float(f"{np.ceil(x / step - 1e-9) * step:.{digits}g}")  # the float that prints as the rounded number


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
            return Zoom(PAPER_ZOOM, paper, f"the paper's zoom (Fig. 2): {paper:.0%} of the votes lie this close")
        limit = round_up(float(np.percentile(d, NEAREST)))
        share = float((d <= limit).mean())
        return Zoom(
            limit,
            share,
            f"{'none' if paper == 0 else f'only {paper:.1%}'} of this model's votes lie within the paper's 0.05 (it suits the "
            "paper's smallNORB model), "
            f"so the zoom shows the nearest {share:.0%} instead",
        )
    limit = round_up(float(np.percentile(d, FULL)))
    share = float((d <= limit).mean())
    return Zoom(limit, share, f"the nearest {share:.0%} of the votes; the farthest few are left out so the bars stay readable")


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
    return (
        f"A vote's distance is the straight-line (Euclidean) distance between the vote and the class's mean pose mu, over the "
        f"{D} entries of the {side}x{side} pose matrix, in the pose's own raw units: not divided by the spread sigma, so it "
        "has no fixed scale and compares only within one model."
    )


def verdict_words(predicted: str, label: str, names) -> str:
    """Whether a prediction is right, when the image's label is one of the classes (a test image):
    'right: the label is 7' or 'wrong: the label is 7'; for a drawing or an upload, that no label says."""
    if label not in [str(n) for n in names]:
        return "no label to check it against"
    return f"{'right' if str(label) == str(predicted) else 'wrong'}: the label is {label}"


def em_share_words(sh: EMShares, name: str, trained: int, label: str | None = None, names=()) -> str:
    """What to look for in the EM histograms, from the numbers em_shares gives the page: the
    winner's share of all assignment (its path over the iterations, rules.path_trend) and how near the votes it
    explains lie, beside the other classes'. With the image's `label` (and the class `names`), it
    says whether the winner, the prediction, is right (verdict_words)."""
    T = len(sh.share)
    first, last = float(sh.share[0]), float(sh.share[-1])
    if T > 1:
        share = (
            f"{rules.path_trend(sh.share, '{:.1%}')}: {first:.1%} at iteration 1 (uniform: {sh.uniform:.1%}), {last:.1%} at iteration {T}"
        )
    else:
        share = f"stays at the uniform {first:.1%}, since one iteration re-assigns nothing"
    near, far = float(sh.near[-1]), float(sh.near_others[-1])
    closer = "nearer to" if near < far else "farther from" if near > far else "as near to"
    said = (
        f"What to look for: the winner, class {name}, is the first panel (red)"
        + ("" if label is None else f"; it is the prediction, {verdict_words(name, label, names)}")
        + f". Its share of all assignment {share}; the "
        f"votes it explains lie on average {near:.3g} from its mean pose, {closer} it than the votes the other classes "
        f"explain are to theirs ({far:.3g})."
    )
    if T != trained:
        said += f"  \nThis model was trained with {trained} EM iterations; with {T} its answers can differ."
    return said


def conv_assignment_words(R: np.ndarray, pos: int, t: int) -> str:
    """The caption of a convolutional capsule layer's assignment map, from the numbers the map and
    the layer hold at iteration t (0-based): R (P, I, J), each output position's assignments of its
    I lower capsules (receptive field slots) to its J upper capsule types; the map draws R[pos]. It
    says what the map shows: every cell equal (the first iteration's even split), or how much of
    each lower capsule's vote this position holds (its column sums) and, when the layer's positions
    show it (rules.trend, the border's mean column sum against the inside's), that positions on
    the grid's border hold larger (or smaller) shares."""
    P, _, J = R.shape
    here = R[pos]
    sums = here.sum(1)  # (I,): each lower capsule's column
    if np.ptp(here) < 1e-6:
        return (
            f"Every cell here is {here.flat[0]:.4f} (1/{J} is {1 / J:.4f}): at iteration {t + 1} each lower capsule's vote is "
            f"split evenly over the {J} upper capsule types at every position it reaches, so each column sums to "
            f"{sums[0]:.3f} at this position."
        )
    said = (
        f"At iteration {t + 1} each lower capsule's assignments sum to 1 over every upper capsule it reaches, at all the "
        f"positions it feeds, so one position's column holds only part of its vote: here the columns sum to {sums.min():.3f} "
        f"to {sums.max():.3f} (mean {sums.mean():.3f})."
    )
    n = round(P**0.5)
    if n < 3:
        return said
    grid = R.sum(2).mean(1).reshape(n, n)  # mean column sum at each position
    inside = float(grid[1:-1, 1:-1].mean())
    border = float((grid.sum() - grid[1:-1, 1:-1].sum()) / (P - (n - 2) ** 2))
    how = {
        "rises": "larger at the border, where the lower capsules reach fewer positions",
        "falls": "smaller at the border",
        "stays about level": "about the same at the border as inside",
    }[rules.trend(inside, border)]
    return said + (
        f" Over the layer's {n} x {n} positions the mean column sum is {border:.3f} on the border and {inside:.3f} inside: "
        f"the shares are {how}."
    )


def position_words(pos: int, n: int) -> str:
    """A row-major position index in words: 'row 2, column 3 of the 6 x 6 grid (from the top left)'."""
    if not 0 <= pos < n * n:
        raise ValueError(f"position {pos} is outside the {n} x {n} grid (0 to {n * n - 1})")
    return f"row {pos // n + 1}, column {pos % n + 1} of the {n} x {n} grid"


def pair_words(l1: int, l2: int) -> str:
    """The labels of a MultiMNIST pair: 'labels 7 and 2'."""
    return f"labels {l1} and {l2}"


def capsule_role(j: int, labels: tuple[int, int], predicted: tuple[int, int]) -> str:
    """What capsule j is for this pair, in words: 'a label and predicted', 'neither a label nor predicted'."""
    is_label, is_pred = j in labels, j in predicted
    if is_label and is_pred:
        return "a label, predicted"
    if is_label:
        return "a label, not predicted"
    if is_pred:
        return "predicted, not a label"
    return "neither a label nor predicted"


def reconstruction_words(red: int, green: int, labels: tuple[int, int], predicted: tuple[int, int]) -> str:
    """'red: capsule 2 (a label, predicted), green: capsule 0 (neither a label nor predicted)'."""
    return f"red: capsule {red} ({capsule_role(red, labels, predicted)}), green: capsule {green} ({capsule_role(green, labels, predicted)})"


@dataclass
class PairRouting:
    """The couplings of a pair's two winning digit capsules, over the pair and over one digit alone.

    images: the two inputs routed (pair, single digit); capsules: the two winners (of the pair).
    maps: (2 inputs, T, 2 capsules, G, G) coupling at each primary-grid position, mean over types.
    mean, weighted, peak: (2 inputs, T, 2 capsules): mean coupling over all primary capsules; the
    same weighted by the length of each capsule's prediction for that digit (the long votes are
    the ones that count in s_j); the largest value of the map. lengths: (2 inputs, J) final |v_j|.
    peak_at: (2 capsules,) the row-major grid position of the pair's brightest final map;
    peak_vote: (2 capsules,) how long the predictions there are, relative to the grid's average;
    peak_ink: (2 capsules,) the share of the pair's pixels under that square that are ink
    (multimnist.ink_under). entropy: (2 inputs,) the mean last-iteration coupling entropy over the
    uniform split's, over the pair and over the digit alone.
    """

    capsules: tuple[int, int]
    maps: np.ndarray
    mean: np.ndarray
    weighted: np.ndarray
    peak: np.ndarray
    lengths: np.ndarray
    uniform: float
    peak_at: np.ndarray
    peak_vote: np.ndarray
    peak_ink: np.ndarray
    entropy: np.ndarray

    def share(self, k: int) -> float:
        """What the near-uniform rule reads for input k (0: the pair, 1: the digit alone): the larger
        of its plain mean couplings to the two winners at the last iteration, the predicted classes'
        (rules.RULES["near uniform"]); the length-weighted means are the long-votes rule's."""
        return float(self.mean[k, -1].max())

    def long_votes(self, k: int) -> str:
        """The long-votes sentences (rules.long_votes_words) for input k's two length-weighted means
        at the last iteration, each beside its plain mean; "" where neither reaches the rule's factor."""
        said = [
            rules.long_votes_words(f"capsule {c}", float(self.weighted[k, -1, q]), self.uniform, float(self.mean[k, -1, q]))
            for q, c in enumerate(self.capsules)
        ]
        return " ".join(x for x in said if x)


@torch.no_grad()
def pair_routing(model, pair_image: np.ndarray, single_image: np.ndarray, capsules: tuple[int, int], iterations: int) -> PairRouting:
    """Route the pair and one of its digits alone (same canvas, same shift) and keep, per
    iteration, the couplings to the pair's two winning capsules (dynamic_trace's coupling maps)."""
    caps = list(capsules)
    maps, mean, weighted, peak, lengths, by_position, ratio = [], [], [], [], [], [], []
    for image in (pair_image, single_image):
        tr = dynamic_trace(model, image, iterations)
        vote = model.predictions(as_batch(image))[0].norm(dim=-1).numpy()[caps]  # (2, I): |u_hat_j|i|
        c = tr.c[:, :, caps]  # (T, I, 2)
        m = np.stack([tr.coupling_maps(t)[caps] for t in range(iterations)])  # (T, 2, G, G)
        maps.append(m)
        mean.append(c.mean(1))
        weighted.append((c * vote.T[None]).sum(1) / np.maximum(vote.sum(1), 1e-12)[None])
        peak.append(m.max((2, 3)))
        lengths.append(tr.lengths[-1])
        by_position.append(vote @ tr.place.T)  # (2, G*G): mean |u_hat| of the capsules at each position
        ratio.append(float(tr.entropy[-1].mean() / tr.uniform_entropy))
    J = len(lengths[0])
    G = maps[0].shape[-1]
    final = maps[0][-1].reshape(2, -1)  # (2, G*G): the pair's last-iteration maps
    peak_at = final.argmax(1)
    peak_vote = by_position[0][[0, 1], peak_at] / np.maximum(by_position[0].mean(1), 1e-12)
    return PairRouting(
        (int(capsules[0]), int(capsules[1])),
        np.stack(maps),
        np.stack(mean),
        np.stack(weighted),
        np.stack(peak),
        np.stack(lengths),
        1.0 / J,
        peak_at,
        peak_vote,
        np.array([ink_under(pair_image, int(p), G) for p in peak_at]),
        np.array(ratio),
    )


def peak_words(r: PairRouting) -> str:
    """Where the pair's brightest final coupling square lies: on the digits' ink or off it (background
    whose predictions happen to agree), and how long the predictions there are."""
    G = r.maps.shape[-1]
    q = int(np.argmax(r.peak[0, -1]))
    ratio, ink = float(r.peak_vote[q]), float(r.peak_ink[q])
    where = (
        f"On the maps, the brightest square for capsule {r.capsules[q]} over the pair ({r.peak[0, -1, q]:.3f}) is at "
        f"{position_words(int(r.peak_at[q]), G)}, "
    )
    if ink > 0:
        where += f"on the digits' ink ({ink:.0%} of the input's pixels under that square are above {INK:g})"
    else:
        where += (
            f"off the digits' ink (none of the input's pixels under that square is above {INK:g}): blank background, where a "
            f"bright square means those primary capsules' predictions happen to agree with capsule {r.capsules[q]}, not that "
            "ink is there"
        )
    where += f". The predictions for {r.capsules[q]} there are {ratio:.1f} times as long as the average: " + (
        "short predictions that carry little into s, so the bright square moves little of the digit capsule's input."
        if ratio < 1
        else "long predictions, so the coupling there does change the digit capsule's input"
        + ("." if ink > 0 else ", from background rather than from either digit.")
    )
    return where


def pair_routing_title(capsules: tuple[int, int], config) -> str:
    """The pair-routing figure's title: the capsules its maps show and the iterations they run (the
    model's `routing_iterations`), true for a model trained with dynamic routing and for one trained
    with other couplings, which this figure replaces by dynamic routing."""
    a, b = capsules
    T = config.routing_iterations
    said = f"Couplings c to capsules {a} and {b} per dynamic-routing iteration ({T}"
    if config.couplings == "dynamic":
        return said + ", as the model was trained)"
    return said + f"; the model was trained with {routing_words(config.couplings)} instead)"


def pair_routing_words(r: PairRouting, single_name: str) -> str:
    """Sentences with the measured numbers at the last iteration, the one the words quote: how far
    the couplings of the two winners are from uniform over the pair and over the single digit (each
    input its own verdict from its own numbers), and what that means."""
    T = r.mean.shape[1]
    a, b = r.capsules
    u = r.uniform
    name = f"{single_name[0].upper()}{single_name[1:]}"
    pair = (
        f"Over the pair, after {T} iteration{'s' if T > 1 else ''} a primary capsule sends on average {r.mean[0, -1, 0]:.3f} of its "
        f"prediction to capsule {a} and {r.mean[0, -1, 1]:.3f} to capsule {b} (uniform: {u:.3f}); counting each prediction by its "
        f"length (the long ones carry the weighted sum s), {r.weighted[0, -1, 0]:.3f} and {r.weighted[0, -1, 1]:.3f}."
    )
    single = (
        f" {name} alone sends on average {r.mean[1, -1, 0]:.3f} and {r.mean[1, -1, 1]:.3f} to capsules {a} and {b}; counted by "
        f"length, {r.weighted[1, -1, 0]:.3f} and {r.weighted[1, -1, 1]:.3f}."
    )
    if T == 1:
        return (
            pair
            + single
            + f" With one iteration the couplings are the uniform 1/{round(1 / u)} by definition: no agreement has been added "
            "yet. Raise the iterations to see them move."
        )
    share = r.share(0)
    verdict = (
        f" At iteration {T}, over the pair the couplings are {rules.uniform_words(float(r.entropy[0]), share, u)} (the larger "
        f"of the pair's two plain averages above)"
    )
    long = r.long_votes(0)
    if rules.near_uniform(float(r.entropy[0]), share, u) and long:
        meaning = verdict + ": routing barely reassigns most primary capsules between the two digits. " + long
    elif rules.near_uniform(float(r.entropy[0]), share, u):
        meaning = (
            verdict + ": routing barely reassigns the primary capsules between the two digits, so this model tells the two digits "
            "apart mostly by the predictions u_hat themselves (their lengths and directions), not by routing explaining one "
            "digit's pixels away from the other."
        )
    else:
        plain_move = float(np.abs(r.mean[0, -1] - u).max())
        long_move = float(np.abs(r.weighted[0, -1] - u).max())
        meaning = (
            verdict + f". Of the pair's numbers above, the plain averages are at most {plain_move:.3f} from uniform and the "
            f"length-weighted ones at most {long_move:.3f}"
        )
        delta = r.weighted[0, -1] - r.weighted[1, -1]  # (2,) pair minus alone
        k = int(np.abs(delta).argmax())
        meaning += (
            f"; the biggest difference between the pair and the digit alone is capsule {r.capsules[k]}: "
            f"{r.weighted[0, -1, k]:.3f} in the pair, {r.weighted[1, -1, k]:.3f} alone, so the other digit's presence "
            f"{'lowers' if delta[k] < 0 else 'raises'} it."
        ) + (f" {long}" if long else "")
    meaning += (
        f" {name} alone, by its own numbers: its couplings are {rules.uniform_words(float(r.entropy[1]), r.share(1), u)} (the larger of its "
        "two plain averages)." + (f" {r.long_votes(1)}" if r.long_votes(1) else "")
    )
    return pair + single + meaning + " " + peak_words(r)


# ---------- the DigitCaps explorer: what each dimension does to this drawing, measured ----------

EXPLORER_INTRO = (
    "Each class capsule (DigitCaps: one per digit for MNIST, one per class for your own images) is a vector of 16 "
    "dimensions. The decoder redraws the image from the chosen capsule alone, in colour for a model trained on colour "
    "images. Sabour et al. (Fig. 4) found dimensions that change one property of the drawing: stroke thickness, skew, "
    "width, localized parts. Which dimension does what is learned, not given, and differs between models, capsules and "
    "images; some offsets change the drawing almost nothing and some make the decoder draw almost nothing, so this page "
    "measures how much each one changes the drawing. Bars show each capsule's length |v_j|: how present the network "
    "finds that class (0 to 1)."
)
TOP_DIMENSIONS = 3  # the dimensions named as changing the drawing most


def change_share(rebuilt: np.ndarray, changed: np.ndarray) -> float:
    """The mean change per pixel from `rebuilt` (the unperturbed reconstruction) to `changed`, as a
    share of rebuilt's mean pixel value (rules.small_change reads it)."""
    return float(np.abs(changed - rebuilt).mean()) / max(float(rebuilt.mean()), 1e-6)


def effect_words(effect: np.ndarray, rebuilt: np.ndarray, name: str, low: float, high: float) -> str:
    """The caption beside the per-dimension bars: `effect` (16,) the mean change per pixel between
    each dimension's ends `low` and `high` (capsviz.analysis.dimension_effect), for capsule `name`
    whose unperturbed reconstruction is `rebuilt`. Names the dimensions that change the drawing most,
    as the bars draw them, and those that change it almost nothing (rules.small_change), or says none does."""
    mean = max(float(rebuilt.mean()), 1e-6)
    order = [int(d) for d in np.argsort(-effect, kind="stable")]
    top = ", ".join(f"d{d} ({effect[d]:.3f})" for d in order[:TOP_DIMENSIONS])
    said = (
        f"For each dimension: how much the picture changes between its two ends ({low:+.2f} and {high:+.2f}), as the mean "
        f"change per pixel. Measured for capsule {name} on this image, the dimensions that change the drawing most are "
        f"{top}; the plain reconstruction's mean pixel value is {mean:.3f}."
    )
    small = [d for d in range(len(effect)) if rules.small_change(float(effect[d]) / mean)]
    if small:
        listed = ", ".join(f"d{d} ({effect[d]:.3f})" for d in small)
        return said + (
            f" {listed} change{'s' if len(small) == 1 else ''} it almost nothing (less than {rules.SMALL_CHANGE:.0%} of that "
            "value): this capsule hardly uses them for this image. A large change can also be the drawing fading away: "
            "the sliders above say when it does."
        )
    return said + (
        f" Every dimension changes it by at least {rules.SMALL_CHANGE:.0%} of that value. A large change can also be the "
        "drawing fading away: the sliders above say when it does."
    )


def offset_words(rebuilt: np.ndarray, changed: np.ndarray, deltas: np.ndarray) -> str:
    """The caption under the perturbed reconstruction `changed` for the slider offsets `deltas` (16,):
    "" with no offset; else whether the decoder draws almost nothing (rules.faint, on the ink kept),
    changes the drawing almost nothing (rules.small_change), or by how much, as measured."""
    if not np.any(deltas):
        return ""
    moved = ", ".join(f"d{d} by {v:+.2f}" for d, v in enumerate(deltas) if v)
    ink = float(changed.sum()) / max(float(rebuilt.sum()), 1e-6)
    share = change_share(rebuilt, changed)
    if rules.faint(ink):
        return (
            f"Moving {moved}, the decoder draws almost nothing ({ink:.0%} of the ink of the unperturbed reconstruction, "
            f"less than {rules.FAINT:.0%}): these offsets push the capsule far from every pose the decoder saw in training, "
            "where most of its units switch off, so this shows no property of the drawing. Move fewer dimensions, or by less."
        )
    if rules.small_change(share):
        return (
            f"Moving {moved} changes the drawing almost nothing: the mean change per pixel is {share:.0%} of the plain "
            f"reconstruction's mean pixel value, less than {rules.SMALL_CHANGE:.0%}."
        )
    return (
        f"Moving {moved} changes the drawing by {share:.0%} of the plain reconstruction's mean pixel value per pixel, "
        f"keeping {ink:.0%} of its ink: compare it with the plain reconstruction above to see what changed."
    )
