"""The rules' words in the reader's language (capsviz.i18n): each outcome of a rule in
capsviz.analysis.rules is one whole message, chosen here by the rule and translated, so a
translation never glues English fragments. `trend_words` writes, in English, what
`rules.path_trend` writes (tests/test_i18n_pages.py keeps them identical)."""

from __future__ import annotations

import math

from capsviz.analysis import rules
from capsviz.i18n import N_, t

# The outcomes the static site writes too (capsviz/site/said.py exports this table for web/js/said.js), each once
MESSAGES = {
    "uniform_near": N_(
        "near uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), more than {limit}, and"
        " the predicted class gets {share} on average, less than {factor} times the uniform {uniform}"
    ),
    "uniform_share": N_(
        "away from uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), more than "
        "{limit}, but the predicted class gets {share} on average, at least {factor} times the uniform {uniform}"
    ),
    "uniform_low": N_(
        "away from uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), not more than "
        "{limit} (the predicted class gets {share} on average, less than {factor} times the uniform {uniform})"
    ),
    "uniform_away": N_(
        "away from uniform: their evenness is {evenness} (100% = spread evenly over all {n} classes), not more than "
        "{limit} (the predicted class gets {share} on average, at least {factor} times the uniform {uniform})"
    ),
    "long_mainly": N_(
        "Weighted by prediction length, {name} gets {weighted}, {times} times uniform: routing moves mainly the "
        "capsules with long predictions."
    ),
    "long_more": N_(
        "Weighted by prediction length, {name} gets {weighted}, {times} times uniform, and the plain mean, {plain}, is "
        "{plain_times} times: routing moves the capsules with long predictions more than the rest."
    ),
    "long_no_more": N_(
        "Weighted by prediction length, {name} gets {weighted}, {times} times uniform, and the plain mean, {plain}, is "
        "{plain_times} times: routing moves the capsules with long predictions no more than the rest."
    ),
}


def _say(key: str, /, **values) -> str:
    """MESSAGES[key] in this run's language, filled (a function of its own: the catalog takes its messages from MESSAGES)."""
    return t(MESSAGES[key], **values)


def _pct(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}%}"


def uniform_words(entropy_ratio: float, share: float | None = None, uniform_share: float | None = None) -> str:
    """ "near uniform" or "away from uniform" (rules.near_uniform), with both parts of the rule and
    the one that decided it (without a share, the entropy part alone), the entropy said as evenness
    (as rules.RULES["near uniform"] explains it): "their evenness is 99.9% (100% = spread evenly over all 10 classes), ..." """
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
        return _say(
            "uniform_near",
            **v,
        )
    if more:
        return _say(
            "uniform_share",
            **v,
        )
    if low:
        return _say(
            "uniform_low",
            **v,
        )
    return _say(
        "uniform_away",
        **v,
    )


def long_votes_words(name: str, weighted: float, uniform: float, plain: float) -> str:
    """The one sentence every page says where a length-weighted share to `name` (already
    translated: "the predicted class", "capsule 3") is at least NEAR_UNIFORM_SHARE times uniform
    (rules.long_votes_move), else "". `plain`: the plain mean beside it, which decides whether
    "mainly" holds (the plain mean below the factor) or the long predictions only move more (or no
    more) than the rest."""
    if not rules.long_votes_move(weighted, uniform):
        return ""
    v = dict(name=name, weighted=f"{weighted:.3f}", times=f"{weighted / uniform:.1f}")
    if plain < rules.NEAR_UNIFORM_SHARE * uniform:
        return _say(
            "long_mainly",
            **v,
        )
    v |= dict(plain=f"{plain:.3f}", plain_times=f"{plain / uniform:.1f}")
    if weighted > plain:
        return _say(
            "long_more",
            **v,
        )
    return _say(
        "long_no_more",
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
    """One sentence on an error of p% on n images against guessing at random (rules.chance_error):
    what guessing gets wrong for this many classes, and whether the model does better by more than
    chance, two standard errors of its own error (rules.beats_chance). Each word keeps its one
    sense: "guessing" (and "at random") is the guesser's error, "chance" only what other test
    images alone could give."""
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


def timing_words(timing: rules.Timing) -> str:
    """'0.60 ms (median of 5, 0.59 to 0.62)', or '1.80 ms (one timing)'."""
    lo, hi = timing.range
    if len(timing.samples) == 1:
        return t("{median} ms (one timing)", median=f"{timing.median:.2f}")
    return t(
        "{median} ms (median of {n}, {lo} to {hi})", median=f"{timing.median:.2f}", n=len(timing.samples), lo=f"{lo:.2f}", hi=f"{hi:.2f}"
    )


def time_words(name_a: str, a: rules.Timing, name_b: str, b: rules.Timing) -> str:
    """One sentence on two timings: a speed claim only when rules.faster allows one (either way)."""
    v = dict(a=name_a, b=name_b, a_time=timing_words(a), b_time=timing_words(b))
    if (x := rules.faster(a, b)) is not None:
        return t("{a} takes {a_time} against {b_time} for {b}: {a} is {x}x faster.", x=f"{x:.1f}", **v)
    if (x := rules.faster(b, a)) is not None:
        return t("{a} takes {a_time} against {b_time} for {b}: {b} is {x}x faster.", x=f"{x:.1f}", **v)
    return t("{a} takes {a_time} against {b_time} for {b}; the timings overlap or are too few to call either faster.", **v)
