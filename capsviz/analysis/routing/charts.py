"""The sentences beside the dynamic routing page's charts over iterations, each from the series
the chart draws: lengths, the couplings' evenness, Appendix A's convergence, the coupling to the
predicted class over a batch and the same weights with 1 to N iterations; and what a model was
trained with."""

from __future__ import annotations

import numpy as np

from capsviz.analysis import rules
from capsviz.analysis.routing.traces import DynamicTrace
from capsviz.analysis.rule_words import long_votes_words, trend_outcome, trend_words, uniform_words
from capsviz.i18n import gap, t, tn
from capsviz.registry import ROUTINGS, routing_words


def trained_with_words(config) -> str:
    """What the model was trained with, from its config: the couplings it was trained with (its
    family's routing where it has no choice) and, for an iterative routing, how many iterations
    (where its entry says one iteration is another routing in effect, so: dynamic routing's couplings
    never move from uniform in one iteration)."""
    name = config.couplings if hasattr(config, "couplings") else config.routing
    entry = ROUTINGS.get(name)
    if entry is None or not entry.iterative:
        return routing_words(name)
    n = config.routing_iterations
    if n == 1 and entry.one_iteration:
        return t("{routing}, 1 iteration (one pass: its couplings stayed uniform, so routing never moved them)", routing=t(entry.words))
    return tn("{routing}, {n} iteration", "{routing}, {n} iterations", n, routing=t(entry.words))


def length_words(lengths: np.ndarray, winner: int, capsule: str, thing: str, name: str) -> str:
    """The caption of the lengths-by-iteration chart (lengths (T, J), as drawn). A length lies in
    0..1, so its trend is the bounded rule's (rules.bounded_trend)."""
    T = lengths.shape[0]
    said = t(
        "A {capsule}'s length is meant as the network's confidence that its {thing} is present (the prediction is the longest: {name}).",
        capsule=capsule,
        thing=thing,
        name=name,
    )
    if T == 1:
        return (
            said
            + gap()
            + t(
                "Routing changes lengths by shifting votes; with one iteration nothing is shifted, and the winner's length is {length}.",
                length=f"{lengths[0, winner]:.3f}",
            )
        )
    first, last = float(lengths[0, winner]), float(lengths[-1, winner])
    return (
        said
        + gap()
        + t(
            "Routing changes lengths by shifting votes; here the winner's length {trend}: {first} at iteration 1, {last} at "
            "iteration {T}, a change of {change} (a length lies between 0 and 1, so it rises or falls only when it moves by more "
            "than {level}).",
            trend=trend_words(lengths[:, winner], "{:.3f}", bounded=True),
            first=f"{first:.3f}",
            last=f"{last:.3f}",
            T=T,
            change=f"{last - first:+.3f}",
            level=f"{rules.LEVEL:.2f}",
        )
    )


ENTROPY_RANGE = (0.0, 105.0)  # the entropy chart's fixed y range, % of uniform: a small drop draws small


def entropy_figure(tr: DynamicTrace, capsule: str, thing: str) -> dict:
    """The entropy chart and its caption, along the axis the couplings sum to 1 over, as % of the
    uniform split's entropy, which the words call evenness (rules.EVENNESS): series (T, 3) mean, 10th
    and 90th percentile; names; title; axis (the y axis's words); caption; y_range (fixed) and line
    (the near-uniform rule's entropy share, dashed)."""
    T, I, J = tr.c.shape
    H = tr.uniform_entropy
    pct = 100 * tr.entropy / H
    mean = pct.mean(1, keepdims=True)
    series = np.concatenate([mean, np.percentile(pct, [10, 90], axis=1).T], 1)
    line = 100 * rules.NEAR_UNIFORM_ENTROPY
    title = t("Evenness of the couplings, %")  # short: a phone shows the whole title; the axis says what 100 is
    if tr.softmax == "inputs":
        what = t(
            "This model's couplings sum to 1 over the input capsules for each {capsule} (its softmax is over the inputs), so "
            "the chart shows how evenly a {capsule} draws on the {I} primary capsules, its evenness: 100% is spread evenly "
            "(1/{I} from each), 0% is all of it from one.",
            capsule=capsule,
            I=I,
        )
    else:
        what = t(
            "The chart shows how evenly each primary capsule spreads its vote over the {J} {capsule}s, its evenness: 100% is "
            "spread evenly (1/{J} to each {thing}), 0% is the whole vote to one {thing}.",
            J=J,
            capsule=capsule,
            thing=thing,
        )
    what += gap() + t(
        "(Evenness is the entropy of the couplings as a share of an even split's.) The dashed line is {line}%, the evenness "
        "the near-uniform rule asks for.",
        line=f"{line:.0f}",
    )
    if T == 1:
        said = gap() + t("With one iteration every split is still even.")
    else:
        said = gap() + entropy_words(series[:, 0], line)
    return {
        "series": series,
        "names": [t("mean"), t("10th percentile"), t("90th percentile")],
        "title": title,
        "axis": t("evenness, % (100 = even)"),
        "caption": what + said,
        "y_range": ENTROPY_RANGE,
        "line": line,
    }


def entropy_words(means, line: float) -> str:
    """The mean coupling entropy (% of uniform) at iterations 1 to T (`means`, as the chart draws it)
    in words: its trend along the path (rules.path_trend) and the near-uniform verdict at T (entropy
    part), joined so that both read as true together. A level change that still ends below the
    `line` (the rule's entropy share, %) says plainly that it moved a little and which side of the
    line it ends on."""
    T = len(means)
    first, last = float(means[0]), float(means[-1])
    verb = rules.trend(first, last)
    change = abs(last - first) / max(abs(first), abs(last), 1e-12)
    near = rules.near_uniform(last / 100)
    v = dict(
        first=f"{first:.1f}",
        last=f"{last:.1f}",
        T=T,
        verdict=uniform_words(last / 100),
        change=f"{change:.1%}",
        level=f"{rules.LEVEL:.0%}",
    )
    if rules.turn(means) is not None:
        return t(
            "For this image the mean {trend}: {first}% at iteration 1, {last}% at iteration {T}; at iteration {T} its couplings "
            "are {verdict}.",
            trend=trend_words(means, "{:.1f}%"),
            **v,
        )
    if verb == "falls" and not near or verb == "rises" and near:
        words = (
            t(
                "For this image the mean falls by {change}: {first}% at iteration 1, {last}% at iteration {T}; so at iteration "
                "{T} its couplings are {verdict}.",
                **v,
            )
            if verb == "falls"
            else t(
                "For this image the mean rises by {change}: {first}% at iteration 1, {last}% at iteration {T}; so at iteration "
                "{T} its couplings are {verdict}.",
                **v,
            )
        )
        return words
    if verb == "falls":
        return t(
            "For this image the mean falls by {change}: {first}% at iteration 1, {last}% at iteration {T}; and at iteration {T} "
            "its couplings are {verdict}.",
            **v,
        )
    if verb == "rises":
        return t(
            "For this image the mean rises by {change}: {first}% at iteration 1, {last}% at iteration {T}; and at iteration {T} "
            "its couplings are {verdict}.",
            **v,
        )
    if near:
        return t(
            "For this image the mean moves only a little (a change of {change}; {level} or less counts as level): {first}% at "
            "iteration 1, {last}% at iteration {T}; so at iteration {T} its couplings are {verdict}.",
            **v,
        )
    v |= dict(points=f"{abs(last - first):.1f}", line=f"{line:.0f}")
    above = first > line
    if last < first:
        return (
            t(
                "For this image the mean falls slightly, by {points} points (a change of {change}; {level} or less counts as "
                "level): {first}% at iteration 1, {last}% at iteration {T}, ending below the {line}% line, which it started "
                "above, so by the near-uniform rule at iteration {T} its couplings are {verdict}.",
                **v,
            )
            if above
            else t(
                "For this image the mean falls slightly, by {points} points (a change of {change}; {level} or less counts as "
                "level): {first}% at iteration 1, {last}% at iteration {T}, below the {line}% line, as at iteration 1, so by "
                "the near-uniform rule at iteration {T} its couplings are {verdict}.",
                **v,
            )
        )
    if last > first:
        return (
            t(
                "For this image the mean rises slightly, by {points} points (a change of {change}; {level} or less counts as "
                "level): {first}% at iteration 1, {last}% at iteration {T}, ending below the {line}% line, which it started "
                "above, so by the near-uniform rule at iteration {T} its couplings are {verdict}.",
                **v,
            )
            if above
            else t(
                "For this image the mean rises slightly, by {points} points (a change of {change}; {level} or less counts as "
                "level): {first}% at iteration 1, {last}% at iteration {T}, below the {line}% line, as at iteration 1, so by "
                "the near-uniform rule at iteration {T} its couplings are {verdict}.",
                **v,
            )
        )
    return (
        t(
            "For this image the mean stays, by {points} points (a change of {change}; {level} or less counts as level): "
            "{first}% at iteration 1, {last}% at iteration {T}, ending below the {line}% line, which it started above, so by "
            "the near-uniform rule at iteration {T} its couplings are {verdict}.",
            **v,
        )
        if above
        else t(
            "For this image the mean stays, by {points} points (a change of {change}; {level} or less counts as level): "
            "{first}% at iteration 1, {last}% at iteration {T}, below the {line}% line, as at iteration 1, so by the "
            "near-uniform rule at iteration {T} its couplings are {verdict}.",
            **v,
        )
    )


def convergence_words(b_change: np.ndarray, c_change: np.ndarray) -> str:
    """Appendix A's caption from the series the chart draws: b_change (T,), c_change (T - 1,)."""
    T = len(b_change)
    if T >= 5:
        said = t(
            "Paper (Fig. A.1): the mean change of b falls roughly log-linearly, about 0.007 at iteration 2 and 1e-5 at "
            "iteration 5. Here, following Procedure 1 literally (b += u_hat . v), the change of b at iteration 2 is {b2} and "
            "at iteration 5 {b5} (it {trend}): each step adds the current agreement, which only vanishes when v does.",
            b2=f"{b_change[1]:.4f}",
            b5=f"{b_change[4]:.4f}",
            trend=trend_words(b_change[1:5], "{:.4f}", start=2),
        )
    else:
        said = t(
            "Paper (Fig. A.1): the mean change of b falls roughly log-linearly, about 0.007 at iteration 2 and 1e-5 at "
            "iteration 5. Here, following Procedure 1 literally (b += u_hat . v), the change of b each step adds the current "
            "agreement, which only vanishes when v does."
        )
    if len(c_change) >= 2:
        first, last = float(c_change[0]), float(c_change[-1])
        kind, _ = trend_outcome(c_change, "{:.1e}", start=2)
        v = dict(trend=trend_words(c_change, "{:.1e}", start=2), first=f"{first:.1e}", last=f"{last:.1e}", k=len(c_change) + 1)
        if kind == "falls":
            said += gap() + t(
                "The couplings c = softmax(b) settle: their change per iteration {trend} ({first} at iteration 2, {last} at "
                "iteration {k}).",
                **v,
            )
        elif kind == "rises":
            said += gap() + t(
                "The couplings c = softmax(b) keep moving more: their change per iteration {trend} ({first} at iteration 2, "
                "{last} at iteration {k}).",
                **v,
            )
        elif kind == "level":
            said += gap() + t(
                "The couplings c = softmax(b) keep moving about as much: their change per iteration {trend} ({first} at "
                "iteration 2, {last} at iteration {k}).",
                **v,
            )
        else:
            said += gap() + t(
                "The couplings c = softmax(b) do not settle steadily: their change per iteration {trend} ({first} at "
                "iteration 2, {last} at iteration {k}).",
                **v,
            )
    return said


def summary_words(cs: dict, k: int, trained: str) -> str:
    """The caption of the coupling-summary chart at iteration k (0-based), the slider's count;
    `trained`: what the model was trained with (trained_with_words)."""
    share, weighted, u = cs["coupling_to_prediction"][k], cs["vote_weighted_coupling_to_prediction"][k], cs["uniform"]
    ratio = cs["entropy"][k] / cs["uniform_entropy"]
    n = len(cs["coupling_to_prediction"])
    images = cs["n_images"]
    said = t(
        "The chart runs the {images} images with dynamic routing, 1 to {n} iterations; this model was trained with {trained}.",
        images=images,
        n=n,
        trained=trained,
    )
    if k == 0:
        verdict = t(
            "at iteration 1 nothing has been routed yet, so the couplings are uniform by construction: {uniform}",
            uniform=uniform_words(ratio),
        )
    elif cs.get("softmax") == "inputs":
        verdict = t("at iteration {k} the predicted class's couplings over the inputs are {uniform}", k=k + 1, uniform=uniform_words(ratio))
    else:
        verdict = t("at iteration {k} the couplings are {uniform}", k=k + 1, uniform=uniform_words(ratio, share, u))
    long = long_votes_words(t("the predicted class"), weighted, u, share)
    long = gap() + long if long else ""
    if cs.get("softmax") == "inputs":
        return (
            said
            + gap()
            + t(
                "Its couplings sum to 1 over the {I} input capsules for each class, so a primary capsule's mean coupling to the "
                "predicted class is the uniform {uniform} whatever routing does ({share} at iteration {k}); counting each vote by "
                "its length, {weighted}. Over the {images} images {verdict}.",
                I=round(1 / u),
                uniform=f"{u:.4f}",
                share=f"{share:.4f}",
                k=k + 1,
                weighted=f"{weighted:.4f}",
                images=images,
                verdict=verdict,
            )
            + long
        )
    return (
        said
        + gap()
        + t(
            "At iteration {k}, the count chosen above, a primary capsule sends on average {share} of its vote to the predicted "
            "class (uniform: {uniform}); counting each vote by its length, {weighted}. Over the {images} images {verdict}.",
            k=k + 1,
            share=f"{share:.3f}",
            uniform=f"{u:.3f}",
            weighted=f"{weighted:.3f}",
            images=images,
            verdict=verdict,
        )
        + long
        + gap()
        + t(
            "Routing only sharpens the couplings as far as the agreements u_hat . v are large: compare the 1- and 3-iteration "
            "models on the Reproduction page."
        )
    )


def dynamic_sweep_words(lengths: np.ndarray, predictions: list[int], T: int, names: list[str], capsule: str) -> str:
    """The caption of "Same weights, 1 to N iterations" for a dynamic-routing model: lengths (N, J) and
    predictions (N,) as drawn; T the count chosen above; names already plain."""
    N = len(predictions)
    p = predictions[T - 1]
    said = tn(
        "Each line is one {capsule}'s length after routing this image with 1 to {N} iterations, the weights unchanged; the "
        "longest is the prediction. With {n} iteration, as chosen above, the prediction is {name} (length {length}).",
        "Each line is one {capsule}'s length after routing this image with 1 to {N} iterations, the weights unchanged; the "
        "longest is the prediction. With {n} iterations, as chosen above, the prediction is {name} (length {length}).",
        T,
        capsule=capsule,
        N=N,
        name=names[p],
        length=f"{lengths[T - 1, p]:.3f}",
    )
    other = [k + 1 for k, q in enumerate(predictions) if q != p]
    if other:
        listed = t(", ").join(t("{k} ({name})", k=k, name=names[predictions[k - 1]]) for k in other)
        said += gap() + t("The prediction differs at {count} of {N} counts: {listed}.", count=len(other), N=N, listed=listed)
    else:
        said += gap() + t("It is {name} with every count from 1 to {N}.", name=names[p], N=N)
    return said
