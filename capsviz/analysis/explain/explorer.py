"""What the DigitCaps explorer says in words: what each dimension does to this drawing, measured."""

from __future__ import annotations

import numpy as np

from capsviz.analysis import rules
from capsviz.i18n import N_, gap, t, tn

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

    def named(d: int) -> str:
        return t("{dimension} ({change})", dimension=f"d{d}", change=f"{effect[d]:.3f}")

    top = sep.join(named(d) for d in order[:TOP_DIMENSIONS])
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
        listed = sep.join(named(d) for d in small)
        return (
            said
            + gap()
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
        + gap()
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
