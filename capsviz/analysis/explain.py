"""What the EM, explorer and MultiMNIST pages say in words: zoom limits that are the ones stated,
the order of the histogram panels, grid positions in words, MultiMNIST captions, how far the
couplings of a pair's two winning capsules move from uniform beside a single digit, and how much
each explorer offset changes the drawing (numpy out)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from capsviz.analysis import as_batch, rules
from capsviz.analysis.multimnist import INK_LEVEL, ink_under
from capsviz.analysis.routing import EMTrace, dynamic_trace
from capsviz.analysis.rule_words import long_votes_words, trend_words, uniform_words
from capsviz.i18n import N_, t, tn
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
        said += " " + t(
            "Its share of all assignment {trend}: {first} at iteration 1 (uniform: {uniform}), {last} at iteration {T}; {votes}.",
            trend=trend_words(sh.share, "{:.1%}"),
            first=f"{first:.1%}",
            uniform=f"{sh.uniform:.1%}",
            last=f"{last:.1%}",
            T=T,
            votes=votes,
        )
    else:
        said += " " + t(
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
            + " "
            + t(
                "Over the layer's {n} x {n} positions the mean column sum is {border} on the border and {inside} inside: the shares "
                "are larger at the border, where the lower capsules reach fewer positions.",
                **v,
            )
        )
    if trend == "falls":
        return (
            said
            + " "
            + t(
                "Over the layer's {n} x {n} positions the mean column sum is {border} on the border and {inside} inside: the shares "
                "are smaller at the border.",
                **v,
            )
        )
    return (
        said
        + " "
        + t(
            "Over the layer's {n} x {n} positions the mean column sum is {border} on the border and {inside} inside: the shares "
            "are about the same at the border as inside.",
            **v,
        )
    )


def position_words(pos: int, n: int) -> str:
    """A row-major position index in words: 'row 2, column 3 of the 6 x 6 grid (from the top left)'."""
    if not 0 <= pos < n * n:
        raise ValueError(f"position {pos} is outside the {n} x {n} grid (0 to {n * n - 1})")
    return t("row {row}, column {col} of the {n} x {n} grid", row=pos // n + 1, col=pos % n + 1, n=n)


def pair_words(l1: int, l2: int) -> str:
    """The labels of a MultiMNIST pair: 'labels 7 and 2'."""
    return t("labels {first} and {second}", first=l1, second=l2)


def capsule_role(j: int, labels: tuple[int, int], predicted: tuple[int, int]) -> str:
    """What capsule j is for this pair, in words: 'a label and predicted', 'neither a label nor predicted'."""
    is_label, is_pred = j in labels, j in predicted
    if is_label and is_pred:
        return t("a label, predicted")
    if is_label:
        return t("a label, not predicted")
    if is_pred:
        return t("predicted, not a label")
    return t("neither a label nor predicted")


def reconstruction_words(red: int, green: int, labels: tuple[int, int], predicted: tuple[int, int]) -> str:
    """'red: capsule 2 (a label, predicted), green: capsule 0 (neither a label nor predicted)'."""
    return t(
        "red: capsule {red} ({red_role}), green: capsule {green} ({green_role})",
        red=red,
        red_role=capsule_role(red, labels, predicted),
        green=green,
        green_role=capsule_role(green, labels, predicted),
    )


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
            long_votes_words(t("capsule {j}", j=c), float(self.weighted[k, -1, q]), self.uniform, float(self.mean[k, -1, q]))
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
        by_position.append(vote @ tr.layout.place.T)  # (2, G*G): mean |u_hat| of the capsules at each position
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
    v = dict(
        capsule=r.capsules[q],
        peak=f"{r.peak[0, -1, q]:.3f}",
        where=position_words(int(r.peak_at[q]), G),
        ink=f"{ink:.0%}",
        level=f"{INK_LEVEL:g}",
        ratio=f"{ratio:.1f}",
    )
    if ink > 0:
        said = t(
            "On the maps, the brightest square for capsule {capsule} over the pair ({peak}) is at {where}, on the digits' ink "
            "({ink} of the input's pixels under that square are above {level}).",
            **v,
        )
    else:
        said = t(
            "On the maps, the brightest square for capsule {capsule} over the pair ({peak}) is at {where}, off the digits' ink "
            "(none of the input's pixels under that square is above {level}): blank background, where a bright square means "
            "those primary capsules' predictions happen to agree with capsule {capsule}, not that ink is there.",
            **v,
        )
    if ratio < 1:
        return (
            said
            + " "
            + t(
                "The predictions for {capsule} there are {ratio} times as long as the average: short predictions that carry little "
                "into s, so the bright square moves little of the digit capsule's input.",
                **v,
            )
        )
    if ink > 0:
        return (
            said
            + " "
            + t(
                "The predictions for {capsule} there are {ratio} times as long as the average: long predictions, so the coupling "
                "there does change the digit capsule's input.",
                **v,
            )
        )
    return (
        said
        + " "
        + t(
            "The predictions for {capsule} there are {ratio} times as long as the average: long predictions, so the coupling there "
            "does change the digit capsule's input, from background rather than from either digit.",
            **v,
        )
    )


def pair_routing_title(capsules: tuple[int, int], config) -> str:
    """The pair-routing figure's title: the capsules its maps show and the iterations they run (the
    model's `routing_iterations`), true for a model trained with dynamic routing and for one trained
    with other couplings, which this figure replaces by dynamic routing."""
    a, b = capsules
    T = config.routing_iterations
    if config.couplings == "dynamic":
        return t("Couplings c to capsules {a} and {b} per dynamic-routing iteration ({T}, as the model was trained)", a=a, b=b, T=T)
    return t(
        "Couplings c to capsules {a} and {b} per dynamic-routing iteration ({T}; the model was trained with {routing} instead)",
        a=a,
        b=b,
        T=T,
        routing=routing_words(config.couplings),
    )


def pair_routing_words(r: PairRouting, single_name: str) -> str:
    """Sentences with the measured numbers at the last iteration, the one the words quote: how far
    the couplings of the two winners are from uniform over the pair and over the single digit (each
    input its own verdict from its own numbers), and what that means."""
    T = r.mean.shape[1]
    a, b = r.capsules
    u = r.uniform
    name = f"{single_name[:1].upper()}{single_name[1:]}"
    pair = tn(
        "Over the pair, after {n} iteration a primary capsule sends on average {m_a} of its prediction to capsule {a} and {m_b} "
        "to capsule {b} (uniform: {uniform}); counting each prediction by its length (the long ones carry the weighted sum "
        "s), {w_a} and {w_b}.",
        "Over the pair, after {n} iterations a primary capsule sends on average {m_a} of its prediction to capsule {a} and "
        "{m_b} to capsule {b} (uniform: {uniform}); counting each prediction by its length (the long ones carry the weighted "
        "sum s), {w_a} and {w_b}.",
        T,
        m_a=f"{r.mean[0, -1, 0]:.3f}",
        m_b=f"{r.mean[0, -1, 1]:.3f}",
        a=a,
        b=b,
        uniform=f"{u:.3f}",
        w_a=f"{r.weighted[0, -1, 0]:.3f}",
        w_b=f"{r.weighted[0, -1, 1]:.3f}",
    )
    single = " " + t(
        "{name} alone sends on average {m_a} and {m_b} to capsules {a} and {b}; counted by length, {w_a} and {w_b}.",
        name=name,
        m_a=f"{r.mean[1, -1, 0]:.3f}",
        m_b=f"{r.mean[1, -1, 1]:.3f}",
        a=a,
        b=b,
        w_a=f"{r.weighted[1, -1, 0]:.3f}",
        w_b=f"{r.weighted[1, -1, 1]:.3f}",
    )
    if T == 1:
        return (
            pair
            + single
            + " "
            + t(
                "With one iteration the couplings are the uniform 1/{J} by definition: no agreement has been added yet. Raise "
                "the iterations to see them move.",
                J=round(1 / u),
            )
        )
    share = r.share(0)
    v = dict(T=T, verdict=uniform_words(float(r.entropy[0]), share, u))
    long = r.long_votes(0)
    if rules.near_uniform(float(r.entropy[0]), share, u) and long:
        meaning = (
            " "
            + t(
                "At iteration {T}, over the pair the couplings are {verdict} (the larger of the pair's two plain averages above): "
                "routing barely reassigns most primary capsules between the two digits.",
                **v,
            )
            + " "
            + long
        )
    elif rules.near_uniform(float(r.entropy[0]), share, u):
        meaning = " " + t(
            "At iteration {T}, over the pair the couplings are {verdict} (the larger of the pair's two plain averages above): "
            "routing barely reassigns the primary capsules between the two digits, so this model tells the two digits apart "
            "mostly by the predictions u_hat themselves (their lengths and directions), not by routing explaining one digit's "
            "pixels away from the other.",
            **v,
        )
    else:
        plain_move = float(np.abs(r.mean[0, -1] - u).max())
        long_move = float(np.abs(r.weighted[0, -1] - u).max())
        delta = r.weighted[0, -1] - r.weighted[1, -1]  # (2,) pair minus alone
        k = int(np.abs(delta).argmax())
        v |= dict(
            plain=f"{plain_move:.3f}",
            long=f"{long_move:.3f}",
            capsule=r.capsules[k],
            in_pair=f"{r.weighted[0, -1, k]:.3f}",
            alone=f"{r.weighted[1, -1, k]:.3f}",
        )
        if delta[k] < 0:
            meaning = " " + t(
                "At iteration {T}, over the pair the couplings are {verdict} (the larger of the pair's two plain averages "
                "above). Of the pair's numbers above, the plain averages are at most {plain} from uniform and the "
                "length-weighted ones at most {long}; the biggest difference between the pair and the digit alone is capsule "
                "{capsule}: {in_pair} in the pair, {alone} alone, so the other digit's presence lowers it.",
                **v,
            )
        else:
            meaning = " " + t(
                "At iteration {T}, over the pair the couplings are {verdict} (the larger of the pair's two plain averages "
                "above). Of the pair's numbers above, the plain averages are at most {plain} from uniform and the "
                "length-weighted ones at most {long}; the biggest difference between the pair and the digit alone is capsule "
                "{capsule}: {in_pair} in the pair, {alone} alone, so the other digit's presence raises it.",
                **v,
            )
        meaning += f" {long}" if long else ""
    meaning += " " + t(
        "{name} alone, by its own numbers: its couplings are {verdict} (the larger of its two plain averages).",
        name=name,
        verdict=uniform_words(float(r.entropy[1]), r.share(1), u),
    )
    meaning += f" {r.long_votes(1)}" if r.long_votes(1) else ""
    return pair + single + meaning + " " + peak_words(r)


# ---------- the DigitCaps explorer: what each dimension does to this drawing, measured ----------

EXPLORER_INTRO = N_(
    "Each class capsule (DigitCaps: one per digit for MNIST, one per class for your own images) is a vector of 16 "
    "dimensions. The decoder redraws the image from the chosen capsule alone, in colour for a model trained on colour "
    "images. Sabour et al. (Fig. 4) found dimensions that change one property of the drawing: stroke thickness, skew, "
    "width, localized parts. Which dimension does what is learned, not given, and differs between models, capsules and "
    "images; some offsets change the drawing almost nothing and some make the decoder draw almost nothing, so this page "
    "measures how much each one changes the drawing. Bars show each capsule's length |v_j|: how present the network "
    "finds that class (0 to 1)."
)  # t(EXPLORER_INTRO) where shown
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
    sep = t(", ")
    top = sep.join(f"d{d} ({effect[d]:.3f})" for d in order[:TOP_DIMENSIONS])
    said = t(
        "For each dimension: how much the picture changes between its two ends ({low} and {high}), as the mean change per "
        "pixel. Measured for capsule {name} on this image, the dimensions that change the drawing most are {top}; the plain "
        "reconstruction's mean pixel value is {mean}.",
        low=f"{low:+.2f}",
        high=f"{high:+.2f}",
        name=name,
        top=top,
        mean=f"{mean:.3f}",
    )
    small = [d for d in range(len(effect)) if rules.small_change(float(effect[d]) / mean)]
    if small:
        listed = sep.join(f"d{d} ({effect[d]:.3f})" for d in small)
        return (
            said
            + " "
            + tn(
                "{listed} changes it almost nothing (less than {limit} of that value): this capsule hardly uses them for this "
                "image. A large change can also be the drawing fading away: the sliders above say when it does.",
                "{listed} change it almost nothing (less than {limit} of that value): this capsule hardly uses them for this "
                "image. A large change can also be the drawing fading away: the sliders above say when it does.",
                len(small),
                listed=listed,
                limit=f"{rules.SMALL_CHANGE:.0%}",
            )
        )
    return (
        said
        + " "
        + t(
            "Every dimension changes it by at least {limit} of that value. A large change can also be the drawing fading away: "
            "the sliders above say when it does.",
            limit=f"{rules.SMALL_CHANGE:.0%}",
        )
    )


def offset_words(rebuilt: np.ndarray, changed: np.ndarray, deltas: np.ndarray) -> str:
    """The caption under the perturbed reconstruction `changed` for the slider offsets `deltas` (16,):
    "" with no offset; else whether the decoder draws almost nothing (rules.faint, on the ink kept),
    changes the drawing almost nothing (rules.small_change), or by how much, as measured."""
    if not np.any(deltas):
        return ""
    moved = t(", ").join(t("d{d} by {offset}", d=d, offset=f"{v:+.2f}") for d, v in enumerate(deltas) if v)
    ink = float(changed.sum()) / max(float(rebuilt.sum()), 1e-6)
    share = change_share(rebuilt, changed)
    if rules.faint(ink):
        return t(
            "Moving {moved}, the decoder draws almost nothing ({ink} of the ink of the unperturbed reconstruction, less than "
            "{limit}): these offsets push the capsule far from every pose the decoder saw in training, where most of its units "
            "switch off, so this shows no property of the drawing. Move fewer dimensions, or by less.",
            moved=moved,
            ink=f"{ink:.0%}",
            limit=f"{rules.FAINT:.0%}",
        )
    if rules.small_change(share):
        return t(
            "Moving {moved} changes the drawing almost nothing: the mean change per pixel is {share} of the plain "
            "reconstruction's mean pixel value, less than {limit}.",
            moved=moved,
            share=f"{share:.0%}",
            limit=f"{rules.SMALL_CHANGE:.0%}",
        )
    return t(
        "Moving {moved} changes the drawing by {share} of the plain reconstruction's mean pixel value per pixel, keeping {ink} "
        "of its ink: compare it with the plain reconstruction above to see what changed.",
        moved=moved,
        share=f"{share:.0%}",
        ink=f"{ink:.0%}",
    )
