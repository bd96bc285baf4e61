"""What the MultiMNIST page says in words: a pair's labels, each capsule's role and its drawing,
and how far the couplings of the pair's two winning capsules move from uniform beside one digit
alone, each from the numbers its figures draw."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from capsviz.analysis import as_batch, rules
from capsviz.analysis.explain.shared import position_words
from capsviz.analysis.multimnist import INK_LEVEL, ink_under
from capsviz.analysis.routing import dynamic_trace
from capsviz.analysis.rule_words import long_votes_words, uniform_words
from capsviz.i18n import gap, t, tn
from capsviz.registry import routing_words


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
        return gap().join(x for x in said if x)


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
            + gap()
            + t(
                "The predictions for {capsule} there are {ratio} times as long as the average: short predictions that carry little "
                "into s, so the bright square moves little of the digit capsule's input.",
                **v,
            )
        )
    if ink > 0:
        return (
            said
            + gap()
            + t(
                "The predictions for {capsule} there are {ratio} times as long as the average: long predictions, so the coupling "
                "there does change the digit capsule's input.",
                **v,
            )
        )
    return (
        said
        + gap()
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
    single = gap() + t(
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
            + gap()
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
            + gap()
            + long
        )
    elif rules.near_uniform(float(r.entropy[0]), share, u):
        meaning = gap() + t(
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
            meaning = gap() + t(
                "At iteration {T}, over the pair the couplings are {verdict} (the larger of the pair's two plain averages "
                "above). Of the pair's numbers above, the plain averages are at most {plain} from uniform and the "
                "length-weighted ones at most {long}; the biggest difference between the pair and the digit alone is capsule "
                "{capsule}: {in_pair} in the pair, {alone} alone, so the other digit's presence lowers it.",
                **v,
            )
        else:
            meaning = gap() + t(
                "At iteration {T}, over the pair the couplings are {verdict} (the larger of the pair's two plain averages "
                "above). Of the pair's numbers above, the plain averages are at most {plain} from uniform and the "
                "length-weighted ones at most {long}; the biggest difference between the pair and the digit alone is capsule "
                "{capsule}: {in_pair} in the pair, {alone} alone, so the other digit's presence raises it.",
                **v,
            )
        meaning += gap() + long if long else ""
    meaning += gap() + t(
        "{name} alone, by its own numbers: its couplings are {verdict} (the larger of its two plain averages).",
        name=name,
        verdict=uniform_words(float(r.entropy[1]), r.share(1), u),
    )
    meaning += gap() + r.long_votes(1) if r.long_votes(1) else ""
    return pair + single + meaning + gap() + peak_words(r)
