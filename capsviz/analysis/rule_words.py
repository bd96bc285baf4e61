"""The rules' words in the reader's language (capsviz.i18n): each outcome of a rule in
capsviz.analysis.rules is one whole message, chosen here by the rule and translated.

`rules.uniform_words`, `rules.long_votes_words`, `rules.path_trend` and `rules.guessing_words` write
the same English; these give each outcome its own catalog message, so a translation never glues
English fragments (the English of both is kept identical by tests/test_i18n_pages.py)."""

from __future__ import annotations

import math

from capsviz.analysis import rules
from capsviz.i18n import t


def _pct(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}%}"


def uniform_words(entropy_ratio: float, share: float | None = None, uniform_share: float | None = None) -> str:
    """rules.uniform_words in this run's language: "near uniform" or "away from uniform", with both
    parts of the rule and the one that decided it (without a share, the entropy part alone)."""
    v = dict(evenness=_pct(entropy_ratio), limit=f"{rules.NEAR_UNIFORM_ENTROPY:.0%}")
    more = entropy_ratio > rules.NEAR_UNIFORM_ENTROPY
    if share is None and uniform_share is not None:
        v["n"] = round(1 / uniform_share)
        if more:
            return t("near uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), more than {limit}", **v)
        return t("away from uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), not more than {limit}", **v)
    if share is None or uniform_share is None:
        if more:
            return t("near uniform: their evenness is {evenness} (100% = spread evenly), more than {limit}", **v)
        return t("away from uniform: their evenness is {evenness} (100% = spread evenly), not more than {limit}", **v)
    v |= dict(n=round(1 / uniform_share), share=f"{share:.2f}", factor=rules.NEAR_UNIFORM_SHARE, uniform=f"{uniform_share:.2f}")
    low = share < rules.NEAR_UNIFORM_SHARE * uniform_share
    if more and low:
        return t(
            "near uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), more than {limit}, and the "
            "predicted class gets {share} on average, less than {factor} times the uniform {uniform}",
            **v,
        )
    if more:
        return t(
            "away from uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), more than {limit}, but "
            "the predicted class gets {share} on average, at least {factor} times the uniform {uniform}",
            **v,
        )
    if low:
        return t(
            "away from uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), not more than {limit} "
            "(the predicted class gets {share} on average, less than {factor} times the uniform {uniform})",
            **v,
        )
    return t(
        "away from uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), not more than {limit} "
        "(the predicted class gets {share} on average, at least {factor} times the uniform {uniform})",
        **v,
    )


def long_votes_words(name: str, weighted: float, uniform: float, plain: float) -> str:
    """rules.long_votes_words in this run's language (`name` already translated: "the predicted
    class", "capsule 3"); "" where the long-votes rule does not hold."""
    if not rules.long_votes_move(weighted, uniform):
        return ""
    v = dict(name=name, weighted=f"{weighted:.3f}", times=f"{weighted / uniform:.1f}")
    if plain < rules.NEAR_UNIFORM_SHARE * uniform:
        return t(
            "Weighted by prediction length, {name} gets {weighted}, {times} times uniform: routing moves mainly the capsules "
            "with long predictions.",
            **v,
        )
    v |= dict(plain=f"{plain:.3f}", plain_times=f"{plain / uniform:.1f}")
    if weighted > plain:
        return t(
            "Weighted by prediction length, {name} gets {weighted}, {times} times uniform, and the plain mean, {plain}, is "
            "{plain_times} times: routing moves the capsules with long predictions more than the rest.",
            **v,
        )
    return t(
        "Weighted by prediction length, {name} gets {weighted}, {times} times uniform, and the plain mean, {plain}, is "
        "{plain_times} times: routing moves the capsules with long predictions no more than the rest.",
        **v,
    )


def trend_outcome(values, fmt: str = "{:.3g}", start: int = 1, bounded: bool = False) -> tuple[str, dict]:
    """Which outcome rules.path_trend gives: "rises", "falls", "level", "peak" (rises to a value,
    then falls) or "dip" (falls to one, then rises), with the turn's value and iteration."""
    v = [float(x) for x in values]
    k = rules.turn(v, bounded)
    if k is None:
        word = (rules.bounded_trend if bounded else rules.trend)(v[0], v[-1])
        return {"rises": "rises", "falls": "falls"}.get(word, "level"), {}
    return ("peak" if v[k] > v[-1] else "dip"), {"value": fmt.format(v[k]), "k": start + k}


def trend_words(values, fmt: str = "{:.3g}", start: int = 1, bounded: bool = False) -> str:
    """rules.path_trend's verb phrase in this run's language (the predicate of "the mean ...")."""
    kind, v = trend_outcome(values, fmt, start, bounded)
    if kind == "rises":
        return t("rises")
    if kind == "falls":
        return t("falls")
    if kind == "level":
        return t("stays about level")
    if kind == "peak":
        return t("rises to {value} at iteration {k}, then falls", **v)
    return t("falls to {value} at iteration {k}, then rises", **v)


def guessing_words(p: float, n: int, classes: int, labels: int = 1) -> str:
    """rules.guessing_words in this run's language: an error of p% on n images against guessing."""
    c = rules.chance_error(classes, labels)
    band = rules.spread(p, n)
    v = dict(
        classes=classes,
        labels=labels,
        chance=f"{c:.2f}",
        ways=math.comb(classes, labels),
        error=f"{p:.2f}",
        band=f"{band:.2f}",
        n=f"{n:,}",
    )
    if labels == 1:
        said = t(
            "Guessing one of {classes} classes at random gets {chance}% wrong (1 - 1/{ways}): {error}% against {chance}% for guessing", **v
        )
        where = t("chance is ±{band} points here: how far {error}% could move on {n} other test images alone, two standard errors", **v)
    else:
        said = t(
            "Guessing {labels} of {classes} classes at once at random gets {chance}% wrong (1 - 1/{ways}): {error}% against {chance}% "
            "for guessing",
            **v,
        )
        if labels == 2:
            where = t("chance is ±{band} points here: how far {error}% could move on {n} other test pairs alone, two standard errors", **v)
        else:
            where = t("chance is ±{band} points here: how far {error}% could move on {n} other test images alone, two standard errors", **v)
    if rules.beats_chance(p, n, classes, labels):
        return t("{said}, {gap} points better than guessing, a gap beyond chance ({band}).", said=said, gap=f"{c - p:.2f}", band=where)
    if p - c > band:
        return t("{said}, {gap} points worse than guessing, a gap beyond chance ({band}).", said=said, gap=f"{p - c:.2f}", band=where)
    return t(
        "{said}, no better than guessing: the gap of {gap} points is within chance ({band}).",
        said=said,
        gap=f"{abs(c - p):.2f}",
        band=where,
    )
