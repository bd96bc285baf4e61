"""Routing playgrounds: a handful of 2-D capsules routed by the project's own routing functions.

Nothing here re-implements routing: `dynamic_toy` calls `capsviz.routing.dynamic_routing` and
`em_toy` calls `capsviz.routing.em_routing`, both with record=True, on inputs small enough to draw
(I lower capsules, J = 2 or 3 upper capsules, 2-D poses). Only s_j, which the dynamic trace does
not store, is recomputed from the recorded couplings (Eq. 2), and tests check squash(s) against
the routing function's own v.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from capsviz.analysis import coupling_entropy, rules
from capsviz.analysis.rule_words import trend_outcome, trend_words
from capsviz.glossary import label
from capsviz.i18n import N_, gap, language, t, tn
from capsviz.routing import dynamic_routing, em_routing, lambda_schedule, self_attention_routing, squash

I_TOY = 6  # lower capsules: few enough to label each one
J_MAX = 3
LIMIT = 3.0  # sliders and plots span [-LIMIT, LIMIT] in both coordinates


def _polar(length: float, degrees: float) -> list[float]:
    a = np.deg2rad(degrees)
    return [length * np.cos(a), length * np.sin(a)]


def _dynamic_presets() -> dict[str, np.ndarray]:
    """Predictions u_hat (I, J_MAX, 2). Agreement is a dot product, so "agreeing" means pointing the
    same way with some length; predictions that disagree point elsewhere. The numbers are rounded
    to the sliders' step (0.1) so a preset is exactly what its sliders show."""
    # two groups, each agreeing on its own upper capsule and scattered for the others
    cluster = [
        [_polar(2.0, 20), _polar(1.5, 200), _polar(1.2, 250)],
        [_polar(2.1, 28), _polar(1.4, 290), _polar(1.3, 130)],
        [_polar(1.9, 14), _polar(1.5, 20), _polar(1.2, 10)],
        [_polar(1.5, 250), _polar(2.0, 115), _polar(1.3, 320)],
        [_polar(1.4, 160), _polar(2.1, 108), _polar(1.2, 200)],
        [_polar(1.5, 300), _polar(1.9, 122), _polar(1.3, 60)],
    ]
    # four capsules agree on upper capsule 1; capsules 5 and 6 are outliers: their prediction for
    # upper 1 is at right angles to the cluster (agreement 0), and the predictions for upper 2
    # cancel out (its v stays short), so nothing pulls the outliers either way
    outliers = [
        [_polar(2.0, 20), _polar(1.5, 200), _polar(1.2, 250)],
        [_polar(2.1, 28), _polar(1.4, 290), _polar(1.3, 130)],
        [_polar(1.9, 14), _polar(1.5, 100), _polar(1.2, 10)],
        [_polar(2.0, 24), _polar(1.3, 20), _polar(1.4, 300)],
        [_polar(1.6, 112), _polar(1.5, 0), _polar(1.4, 60)],
        [_polar(1.7, 290), _polar(1.5, 180), _polar(1.4, 180)],
    ]
    rng = np.random.default_rng(7)  # fixed: a preset is the same for everyone who opens the link
    noise = rng.uniform(-2.0, 2.0, (I_TOY, J_MAX, 2))
    return {
        name: np.round(np.asarray(p, np.float64), 1) + 0.0
        for name, p in {"agreeing cluster": cluster, "outliers": outliers, "noise": noise}.items()
    }


def _em_presets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Votes (I, J_MAX, 2) and lower activations a_in (I,). Each upper capsule gets its own votes
    (in a network, through its own transform W_ij): a group of lower capsules whose votes for one
    upper capsule land close together is a cluster that capsule can explain."""
    # capsules 1-3 vote tightly for upper 1 (spread ~0.05), capsules 4-6 loosely for upper 2
    # (spread ~0.3); each group's votes for the other capsules are scattered far apart
    two = [
        [[1.0, 1.0], [-2.5, -2.0], [2.5, -2.5]],
        [[1.1, 0.9], [2.5, 2.5], [-2.5, 2.5]],
        [[1.0, 1.1], [2.5, -2.5], [0.0, -2.5]],
        [[-2.5, -2.5], [-1.0, 0.5], [-2.5, -1.0]],
        [[2.5, -2.0], [-1.4, 0.9], [1.5, 2.5]],
        [[-2.5, 2.5], [-0.7, 0.1], [2.5, 0.5]],
    ]
    outliers = [
        [[1.0, 1.0], [-2.5, -2.0], [2.5, -2.5]],
        [[1.1, 0.9], [2.5, 2.5], [-2.5, 2.5]],
        [[1.0, 1.1], [2.5, -2.5], [0.0, -2.5]],
        [[0.9, 1.0], [-1.0, 2.5], [-2.5, -1.0]],
        [[-2.5, -2.0], [2.0, 0.0], [1.5, 2.5]],
        [[2.5, -2.5], [-2.0, -2.5], [-2.5, 0.5]],
    ]
    rng = np.random.default_rng(11)
    noise = rng.uniform(-2.5, 2.5, (I_TOY, J_MAX, 2))
    ones = np.ones(I_TOY)
    return {
        "two clusters": (np.asarray(two, np.float64), ones),
        "outliers": (np.asarray(outliers, np.float64), ones),
        "noise": (np.round(noise, 1) + 0.0, ones),
    }


DYNAMIC_PRESETS = _dynamic_presets()
EM_PRESETS = _em_presets()


@dataclass
class DynamicToy:
    """Procedure 1 of Sabour et al. on a toy, every iteration recorded (t = 0 .. T-1).

    u_hat: (I, J, 2) the predictions routed. b, c: (T, I, J) the logits and couplings each
    iteration used (b[0] = 0, c[0] uniform). s, v: (T, J, 2). agreement: (T, I, J) u_hat . v_t,
    what iteration t adds to b.
    """

    u_hat: np.ndarray
    b: np.ndarray
    c: np.ndarray
    s: np.ndarray
    v: np.ndarray
    agreement: np.ndarray

    @property
    def iterations(self) -> int:
        return len(self.c)

    def entropy(self) -> np.ndarray:
        """(T, I): how undecided each lower capsule is (log J when uniform, 0 when all to one)."""
        return coupling_entropy(self.c)


def dynamic_toy(u_hat: np.ndarray, iterations: int = 3) -> DynamicToy:
    """u_hat (I, J, D) -> DynamicToy, routed by `capsviz.routing.dynamic_routing`."""
    u = torch.as_tensor(np.asarray(u_hat), dtype=torch.float64).unsqueeze(0)  # (1, I, J, D): float64, the toy's numbers printed exactly
    r = dynamic_routing(u, iterations, record=True)
    c = r.c[:, 0]  # (T, I, J)
    s = torch.einsum("tij,ijd->tjd", c, u[0])  # (T, J, D): Eq. 2 with the couplings routing used
    v = r.v_trace[:, 0]  # (T, J, D)
    agreement = torch.einsum("ijd,tjd->tij", u[0], v)  # (T, I, J)
    return DynamicToy(np.asarray(u_hat, np.float64), r.b[:, 0].numpy(), c.numpy(), s.numpy(), v.numpy(), agreement.numpy())


def attention_toy(u_hat: np.ndarray) -> DynamicToy:
    """u_hat (I, J, D) -> a one-iteration DynamicToy routed by `capsviz.routing.self_attention_routing`
    (Efficient-CapsNet, no learned prior): b holds the attention logits a_ij = u_hat_j|i . sum_k
    u_hat_j|k / sqrt(D), c their softmax over j, v uses Efficient-CapsNet's squash; agreement is a."""
    u = torch.as_tensor(np.asarray(u_hat), dtype=torch.float64).unsqueeze(0)  # (1, I, J, D)
    r = self_attention_routing(u.movedim(2, 1), record=True)  # takes (B, J, I, D)
    c, a = r.c[:, 0], r.b[:, 0]  # (1, I, J)
    s = torch.einsum("tij,ijd->tjd", c, u[0])  # (1, J, D)
    return DynamicToy(np.asarray(u_hat, np.float64), a.numpy(), c.numpy(), s.numpy(), r.v_trace[:, 0].numpy(), a.numpy())


def squash_np(s: np.ndarray) -> np.ndarray:
    """The routing module's squash on numpy (tests compare the toy's s with its v)."""
    return squash(torch.as_tensor(s, dtype=torch.float64)).numpy()


@dataclass
class EMToy:
    """EM routing (Procedure 1 of Hinton et al.) on a toy, every iteration recorded.

    votes: (I, J, 2); a_in: (I,). R: (T, I, J) the assignments each M-step used (R[0] uniform).
    mu, sigma: (T, J, 2) each M-step's Gaussian: mean pose and spread per coordinate.
    a: (T, J) each M-step's activation; lambdas: (T,) the inverse temperature schedule.
    """

    votes: np.ndarray
    a_in: np.ndarray
    R: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    a: np.ndarray
    lambdas: np.ndarray

    @property
    def iterations(self) -> int:
        return len(self.R)


def em_toy(
    votes: np.ndarray,
    a_in: np.ndarray,
    iterations: int = 3,
    beta_u: float = 0.0,
    beta_a: float = 0.0,
    final_lambda: float = 0.3,
) -> EMToy:
    """votes (I, J, H), a_in (I,) -> EMToy, routed by `capsviz.routing.em_routing` (its defaults:
    variance floor, linear lambda ramp, costs standardised across the J capsules)."""
    V = torch.as_tensor(np.asarray(votes), dtype=torch.float32)
    a = torch.as_tensor(np.asarray(a_in), dtype=torch.float32)
    r = em_routing(V, a, iterations, beta_u, beta_a, final_lambda=final_lambda, record=True)
    return EMToy(
        np.asarray(votes, np.float64),
        np.asarray(a_in, np.float64),
        r.R.numpy(),
        r.mu_trace.numpy(),
        r.sigma.numpy(),
        r.a_trace.numpy(),
        np.asarray(lambda_schedule(iterations, final_lambda)),
    )


def encode_points(points: np.ndarray) -> str:
    """Points (any shape) -> a compact URL value: numbers at one decimal joined by '_'."""
    return "_".join(f"{x:.1f}".rstrip("0").rstrip(".") if x else "0" for x in np.round(np.asarray(points).ravel(), 1) + 0.0)


def decode_points(text: str | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """The inverse of `encode_points`, or None when `text` is absent or malformed (a hand-edited link)."""
    if not text:
        return None
    try:
        values = np.array([float(x) for x in text.split("_")], np.float64)
    except ValueError:
        return None
    if values.size != int(np.prod(shape)) or not np.all(np.isfinite(values)):
        return None
    return np.clip(values, -LIMIT, LIMIT).reshape(shape)


# ---------- what the page says, from the numbers its tables draw ----------
# Every number a sentence quotes is rounded as the table beside it shows it: couplings, logits,
# assignments and activations at 3 decimals (TABLE), poses at 2 (POSE). Each sentence is one message
# of the catalog (capsviz.i18n) in the reader's language; the tables' keys stay English (the page
# names each column in the reader's language).
TABLE = 3
TABLE_FMT = f"{{:.{TABLE}f}}"  # the tables' decimals, as rules.path_trend formats a value
POSE = 2

# The presets by their words: the keys are what a link writes (?preset=), the words what the page shows.
PRESET_NAMES = {
    "agreeing cluster": N_("agreeing cluster"),
    "outliers": N_("outliers"),
    "noise": N_("noise"),
    "two clusters": N_("two clusters"),
}


def _r(x: float, places: int = TABLE) -> str:
    return f"{x:.{places}f}"


def _pose(p) -> str:
    return f"({p[0]:.{POSE}f}, {p[1]:.{POSE}f})"


def _numbers(ks: list[int]) -> str:
    """Lower capsules by their numbers, as the tables count them (from 1): "1, 3"."""
    return t(", ").join(str(k + 1) for k in ks)


def _clauses(parts: list[str]) -> str:
    """Clauses of one sentence, each after the one before as the language joins them ("; " in English)."""
    said = parts[0]
    for part in parts[1:]:
        said = t("{clauses}; {clause}", clauses=said, clause=part)
    return said


def split_words(c: np.ndarray) -> str:
    """One sentence on how each lower capsule splits its prediction, couplings c (I, J) as the table
    shows them: which upper capsule gets each one's largest coupling (quoted), and which capsules are
    still near uniform (capsviz.analysis.rules)."""
    J = c.shape[1]
    ratio = coupling_entropy(c) / np.log(J)
    top = c.argmax(1)
    split = [k for k in range(len(c)) if rules.near_uniform(float(ratio[k]), float(c[k].max()), 1.0 / J)]
    parts = []
    for j in range(J):
        ks = [k for k in range(len(c)) if top[k] == j and k not in split]
        if ks:
            quoted = t(", ").join(t("{k} ({c})", k=k + 1, c=_r(c[k, j])) for k in ks)
            parts.append(
                tn(
                    "lower capsule {quoted} sends most of its prediction to upper {j}",
                    "lower capsules {quoted} send most of their prediction to upper {j}",
                    len(ks),
                    quoted=quoted,
                    j=j + 1,
                )
            )
    if split:
        quoted = t(", ").join(t("{k} (largest {c})", k=k + 1, c=_r(c[k].max())) for k in split)
        parts.append(
            tn("lower capsule {quoted} is still near uniform", "lower capsules {quoted} are still near uniform", len(split), quoted=quoted)
        )
    return t("{clauses}.", clauses=_clauses(parts))


def _path_words(kind: str, at: dict, ks: list[int]) -> str:
    """One outcome of the rises / falls and peaks / dips rules (rule_words.trend_outcome) for the
    largest couplings of lower capsules `ks`, as one message."""
    v = dict(ks=_numbers(ks), **at)
    n = len(ks)
    if kind == "rises":
        return tn("rises for lower capsule {ks}", "rises for lower capsules {ks}", n, **v)
    if kind == "falls":
        return tn("falls for lower capsule {ks}", "falls for lower capsules {ks}", n, **v)
    if kind == "level":
        return tn("stays about level for lower capsule {ks}", "stays about level for lower capsules {ks}", n, **v)
    if kind == "peak":
        return tn(
            "rises to {value} at iteration {k}, then falls for lower capsule {ks}",
            "rises to {value} at iteration {k}, then falls for lower capsules {ks}",
            n,
            **v,
        )
    return tn(
        "falls to {value} at iteration {k}, then rises for lower capsule {ks}",
        "falls to {value} at iteration {k}, then rises for lower capsules {ks}",
        n,
        **v,
    )


def since_words(c: np.ndarray) -> str:
    """How each lower capsule's largest coupling moved since iteration 1, couplings c (t + 1, I, J) at
    iterations 1 to t + 1: its path by capsviz.analysis.rules.path_trend, from the uniform 1/J (as
    the table showed at iteration 1) to the largest coupling quoted for this iteration."""
    groups: dict[str, list[int]] = {}
    outcome = {}
    for k in range(c.shape[1]):
        path = c[:, k, int(c[-1, k].argmax())]
        said = rules.path_trend(path, TABLE_FMT)  # the rule's outcome, one group per outcome
        groups.setdefault(said, []).append(k)
        outcome.setdefault(said, trend_outcome(path, TABLE_FMT))
    start = t(", ").join(sorted({_r(x) for x in c[0].ravel()}))
    paths = _clauses([_path_words(*outcome[said], ks) for said, ks in groups.items()])
    return t("Since iteration 1, when the couplings were {start}, the largest coupling {paths}.", start=start, paths=paths)


TOY_RULE_MESSAGE = N_(
    "A lower capsule's couplings are called near uniform when their evenness is more than {entropy} and its largest "
    "coupling is less than {share} times the uniform share. Evenness says how evenly a capsule spreads its vote over the "
    "capsules it can send it to: 100% when each gets the same share, 0% when one gets all of it (the entropy of its "
    "couplings as a share of an even split's). Both must hold: a capsule can spread its vote almost evenly while still "
    "favouring one upper capsule."
)
TOY_RULE_VALUES = {"entropy": f"{rules.NEAR_UNIFORM_ENTROPY:.0%}", "share": f"{rules.NEAR_UNIFORM_SHARE}"}
TOY_RULE = TOY_RULE_MESSAGE.format(**TOY_RULE_VALUES)  # in English, as the tests quote it


def toy_rule() -> str:
    """The near-uniform rule in the toy's terms (a lower capsule's largest coupling), in the reader's language."""
    return t(TOY_RULE_MESSAGE, **TOY_RULE_VALUES)


@dataclass
class View:
    """What the page shows beside a playground's figure: `intro` (Markdown about the mechanism),
    `said` (the boxed sentence on this iteration's numbers), `lower` and `upper` (the two tables,
    column -> values, drawn at TABLE decimals unless a column is text; the keys are English, the
    text values in the reader's language), `try_it` (the caption)."""

    intro: str
    said: str
    lower: dict
    upper: dict
    try_it: str = ""


def _lower_names(I: int) -> list[str]:
    return [t("lower {i}", i=k + 1) for k in range(I)]


def _upper_names(J: int) -> list[str]:
    return [t("upper {j}", j=j + 1) for j in range(J)]


def dynamic_view(toy: DynamicToy, it: int) -> View:
    """Routing by agreement at iteration it (0-based)."""
    J = toy.c.shape[2]
    intro = t(
        "**What happens.** At iteration 1 every {c} is {value} (1/{J}): each lower capsule splits its prediction equally. "
        "Each upper capsule sums what it receives ({s}) and squashes it ({v}, at most length 1). Then every lower capsule "
        "adds its agreement u_hat . v to its routing logit b: a prediction pointing the way the output points gains coupling "
        "next time, one pointing away loses it (Procedure 1, lines 4-7).",
        c=label("c"),
        value=_r(toy.c[0, 0, 0]),
        J=J,
        s=label("s"),
        v=label("v"),
    )
    c = toy.c[it]
    said = t("At iteration {k}: {split}", k=it + 1, split=split_words(c))
    if it > 0:
        said += gap() + since_words(toy.c[: it + 1])
    turned = any(rules.turn(toy.c[: it + 1, k, int(c[k].argmax())]) is not None for k in range(len(c)))
    definitions = [t("Near uniform: {rule}", rule=toy_rule())]
    if it > 0:
        definitions.append(t("Rises / falls: {rule}", rule=rules.rule_words("rises / falls")))
    if turned:
        definitions.append(t("Peaks / dips: {rule}", rule=rules.rule_words("peaks / dips")))
    said += gap() + t("({definitions})", definitions=gap().join(definitions))
    lower: dict = {"lower capsule": _lower_names(len(c))}
    for j in range(J):
        lower[f"b to {j + 1}"] = toy.b[it, :, j]
        lower[f"c to {j + 1}"] = c[:, j]
        lower[f"u_hat.v with {j + 1}"] = toy.agreement[it, :, j]
    upper = {
        "upper capsule": _upper_names(J),
        "s (x, y)": [_pose(p) for p in toy.s[it]],
        "|s|": np.linalg.norm(toy.s[it], axis=1),
        "v (x, y)": [_pose(p) for p in toy.v[it]],
        "|v| (presence)": np.linalg.norm(toy.v[it], axis=1),
    }
    return View(intro, said, lower, upper, dynamic_try())


def attention_view(toy: DynamicToy) -> View:
    """Self-attention routing's one pass."""
    J = toy.c.shape[2]
    D = toy.u_hat.shape[-1]
    intro = t(
        "**What happens.** Self-attention routing (Efficient-CapsNet) runs once, without iterations. For each upper capsule, "
        "every lower capsule's prediction is compared with the sum of all the predictions it receives: the attention "
        "`a = u_hat . sum(u_hat) / sqrt({D})` is large for a prediction that points the way most others point. Each lower "
        "capsule's {c} is the softmax of its attentions over the {J} upper capsules. Efficient-CapsNet also adds its {prior} "
        "to c; this playground leaves it at 0.",
        D=D,
        c=label("c"),
        J=J,
        prior=label("prior"),
    )
    said = t(
        "In the one pass: {split} Switch to routing by agreement to compare: the same predictions, routed in iterations. "
        "(Near uniform: {rule})",
        split=split_words(toy.c[0]),
        rule=toy_rule(),
    )
    lower: dict = {"lower capsule": _lower_names(toy.c.shape[1])}
    for j in range(J):
        lower[f"a to {j + 1}"] = toy.b[0, :, j]
        lower[f"c to {j + 1}"] = toy.c[0, :, j]
    return View(intro, said, lower, {})


def em_view(toy: EMToy, it: int, beta_a: float) -> View:
    """EM routing at iteration it (0-based); `beta_a` as routed (the two-capsule activations depend on it)."""
    J = toy.R.shape[2]
    lam = toy.lambdas
    intro = t(
        "**What happens.** Each upper capsule is a Gaussian over the votes it receives. The M-step refits its {mu} and "
        "{sigma} to the votes weighted by {R} and by each lower capsule's activation, and sets its {a}: the tighter its "
        "cluster, the more active ({beta_u} prices each unit of spread). The E-step then reassigns each vote by how well "
        "it fits each Gaussian. The first M-step uses equal assignments ({first} each, 1/{J}); a larger {lam} makes the "
        "activations more decisive.",
        mu=label("mu"),
        sigma=label("sigma"),
        R=label("R"),
        a=label("a_j"),
        beta_u=label("beta_u"),
        first=_r(toy.R[0, 0, 0]),
        J=J,
        lam=label("lambda"),
    )
    lambdas = t(", ").join(_r(x, 2) for x in lam)
    if len(lam) > 1:
        said = t(
            "Inverse temperature per iteration: {lambdas} (it {trend} over the iterations).",
            lambdas=lambdas,
            trend=trend_words(lam, "{:.2f}"),
        )
    else:
        said = t("Inverse temperature per iteration: {lambdas} (one iteration).", lambdas=lambdas)
    a = toy.a[it]
    v = dict(
        k=it + 1,
        lam=_r(lam[it], 2),
        activations=t(", ").join(t("upper {j} {a}", j=j + 1, a=_r(a[j])) for j in range(J)),
    )
    pair = sorted(1 / (1 + np.exp(-lam[it] * (beta_a + s))) for s in (-1.0, 1.0))
    if J == 2 and [_r(x) for x in pair] == sorted(_r(x) for x in a):
        said += gap() + t(
            "Activations at iteration {k} (lambda {lam}): {activations}. capsviz standardises the capsules' costs against "
            "each other before the logistic (`RESULTS.md`: where capsviz departs from the papers), so an activation says how "
            "tight a cluster is compared with the others: with two upper capsules the standardised costs are -1 and +1, so "
            "the activations are `logistic(lambda (beta_a -+ 1))` = {low} and {high} whatever the votes; that leaves only "
            "which one is tighter. Pick 3 upper capsules to see them graded.",
            low=_r(pair[0]),
            high=_r(pair[1]),
            **v,
        )
    elif J == 2:
        said += gap() + t(
            "Activations at iteration {k} (lambda {lam}): {activations}. capsviz standardises the capsules' costs against "
            "each other before the logistic (`RESULTS.md`: where capsviz departs from the papers), so an activation says how "
            "tight a cluster is compared with the others: here the two clusters cost the same, so both activations are "
            "equal. Pick 3 upper capsules to see them graded.",
            **v,
        )
    else:
        said += gap() + t(
            "Activations at iteration {k} (lambda {lam}): {activations}. capsviz standardises the capsules' costs against "
            "each other before the logistic (`RESULTS.md`: where capsviz departs from the papers), so an activation says how "
            "tight a cluster is compared with the others.",
            **v,
        )
    lower: dict = {"lower capsule": _lower_names(len(toy.a_in)), "a (lower activation)": toy.a_in}
    for j in range(J):
        lower[f"R to {j + 1}"] = toy.R[it, :, j]
    upper = {
        "upper capsule": _upper_names(J),
        "mu (mean pose)": [_pose(p) for p in toy.mu[it]],
        "sigma (spread)": [_pose(p) for p in toy.sigma[it]],
        "a (activation)": a,
    }
    return View(intro, said, lower, upper, em_try())


def dynamic_try() -> str:
    """The dynamic playground's suggestion, with the numbers it gives (routed here, not hand-copied):
    in the outliers preset, move lower capsule 5's prediction for upper 1 next to the cluster."""
    return _dynamic_try(language())


@functools.cache
def _dynamic_try(lang: str) -> str:  # once per language: the same numbers in every one
    u = DYNAMIC_PRESETS["outliers"][:, :2].copy()
    before = dynamic_toy(u, 3).c[:, 4, 0]
    u[4, 0] = [1.9, 0.5]
    after = dynamic_toy(u, 3).c[:, 4, 0]
    return t(
        "Try: in the {preset} preset (2 upper capsules, 3 iterations), move lower capsule 5's prediction for upper 1 next to "
        "the cluster (x 1.9, y 0.5): its coupling to upper 1 {after_trend} over the iterations ({after}), where unmoved it "
        "{before_trend} ({before}). The Dynamic routing page measures how far couplings move in the trained models, where "
        "1152 predictions for ten capsules rarely form one clean cluster.",
        preset=t(PRESET_NAMES["outliers"]),
        after_trend=trend_words(after, TABLE_FMT),
        after=t(", ").join(_r(x) for x in after),
        before_trend=trend_words(before, TABLE_FMT),
        before=t(", ").join(_r(x) for x in before),
    )


def em_try() -> str:
    """The EM playground's suggestions, with the numbers they give (3 iterations, the sliders' defaults)."""
    return _em_try(language())


def _beside(toy: EMToy) -> str:
    """Upper 1's last activation beside upper 2's, as the table shows them."""
    mine, other = _r(toy.a[-1, 0]), _r(toy.a[-1, 1])
    if toy.a[-1, 0] > toy.a[-1, 1]:
        return t("{a} (above upper 2's {other})", a=mine, other=other)
    return t("{a} (below upper 2's {other})", a=mine, other=other)


@functools.cache
def _em_try(lang: str) -> str:  # once per language: the same numbers in every one
    votes, a_in = EM_PRESETS["two clusters"]
    loose = votes.copy()
    loose[0, 0, 0] = -1.0
    was, now = em_toy(votes, a_in, 3), em_toy(loose, a_in, 3)
    spread = [float(np.linalg.norm(toy.sigma[-1, 0])) for toy in (was, now)]
    ov, oa = EM_PRESETS["outliers"]
    quiet = oa.copy()
    quiet[4] = 0.05
    mu_was, mu_now = em_toy(ov[:, :2], oa, 3).mu[-1, 0], em_toy(ov[:, :2], quiet, 3).mu[-1, 0]
    return t(
        "Try: in the {two} preset with 3 upper capsules, move lower capsule 1's vote for upper 1 away (x -1.0): upper 1's "
        "spread sigma goes from {sigma_was} to {sigma_now} (it {trend}) and its activation from {a_was} to {a_now}. In the "
        "{outliers} preset with 2 upper capsules, lower capsule 5's activation a down to 0.05 moves upper 1's mean pose from "
        "{mu_was} to {mu_now}; the cluster of lower capsules 1-4 votes around {cluster}.",
        two=t(PRESET_NAMES["two clusters"]),
        sigma_was=_pose(was.sigma[-1, 0]),
        sigma_now=_pose(now.sigma[-1, 0]),
        trend=trend_words(spread),
        a_was=_beside(was),
        a_now=_beside(now),
        outliers=t(PRESET_NAMES["outliers"]),
        mu_was=_pose(mu_was),
        mu_now=_pose(mu_now),
        cluster=_pose(ov[:4, 0].mean(0)),
    )
