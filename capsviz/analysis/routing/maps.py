"""The sentences beside the coupling maps of the dynamic routing page, each from the numbers its
maps draw: the span of the couplings at an iteration, where each square's number comes from, and
the detailed map's axes and hover names; and, for primary capsules on no grid, the heatmap of
every capsule's couplings that stands in for the maps."""

from __future__ import annotations

import functools
import math

import numpy as np

from capsviz.analysis import rules
from capsviz.analysis.routing.traces import DynamicTrace
from capsviz.i18n import language, t


def flat(maps: np.ndarray) -> bool:
    """Whether every coupling drawn is equal (iteration 1, or agreements too small to move them)."""
    return bool(np.ptp(maps) < 1e-6)


def once_words(tr: DynamicTrace) -> str:
    """What the page says when routing runs once (T = 1): only the coupling maps are flat."""
    return t(
        "Routing runs once here, so there is nothing to step through: before the first agreement is added, every "
        "set of couplings is even (c = {c} each), so the coupling maps below are flat. The agreement map "
        "further down is not: it is what this one pass measured, what a second iteration would add to b. "
        "Raise **Routing iterations at inference** to watch the couplings move.",
        c=f"{tr.uniform:.3g}",
    )


def _digits(tr: DynamicTrace) -> int:
    return 2 + max(1, -math.floor(math.log10(tr.uniform)))  # 3 decimals for 1/10, 5 for 1/144: the digits that move


def times(ratio: float) -> str:
    """A ratio with one decimal, or as many as it takes to show a non-zero ratio as non-zero
    (0.04, not 0.0)."""
    if ratio == 0 or abs(ratio) >= 0.1:
        return f"{ratio:.1f}"
    return f"{ratio:.{-math.floor(math.log10(abs(ratio)))}f}"


def span_words(lo: float, hi: float, uniform: float, d: int) -> str:
    """The span of couplings drawn, by the small-span rule (rules.decide("small span")): a clause that follows
    "At iteration k"."""
    v = dict(lo=f"{lo:.{d}f}", hi=f"{hi:.{d}f}", uniform=f"{uniform:.{d}f}")
    case = rules.decide("small span", lo=lo, hi=hi, uniform=uniform)[0]
    if case == "span_none":
        return t("every square is {lo} (uniform: {uniform}): the map is one colour, with nothing to compare", **v)
    if case == "span_small":
        return t(
            "the squares span only {lo} to {hi} (uniform: {uniform}), all within {factor} times uniform either way, so the "
            "colours exaggerate small differences",
            factor=rules.NEAR_UNIFORM_SHARE,
            **v,
        )
    return t(
        "the squares span {lo} to {hi} (uniform: {uniform}), from {low_times} to {high_times} times uniform",
        low_times=times(lo / uniform),
        high_times=times(hi / uniform),
        **v,
    )


def map_words(tr: DynamicTrace, t_: int, capsule: str, thing: str, digits: bool, j: int, name: str) -> tuple[str, str]:
    """The coupling maps' title and caption at iteration t_ (0-based): where each square's number
    comes from (the model's grouping), the span of the couplings the maps draw, and beside class j's
    map (`name`, the one the detailed map shows) the span of its single primary capsules, the
    detailed map's own range."""
    maps = tr.coupling_maps(t_)
    G = tr.layout.grid
    title = t("Iteration {k}: couplings c", k=t_ + 1)
    if tr.layout.grouping == "paper":
        where = t(
            "each square is one of the {G}x{G} positions of the primary capsules (rows and columns counted from 1 at the "
            "top left), averaged over their {types} types",
            G=G,
            types=tr.layout.types,
        )
    else:
        where = t(
            "a primary capsule of this model is {dim} neighbouring values of one conv map (some straddle two maps), not one "
            "position's channels, so it has no one position: each square averages the couplings of the capsules built from "
            "the values at that position, each counted by its share of them",
            dim=tr.layout.dim,
        )
    d = _digits(tr)
    if flat(maps):
        spread = (
            t("At iteration 1 every coupling is {c}: nothing has been routed yet.", c=f"{maps.max():.{d}f}")
            if t_ == 0
            else t(
                "At iteration {k} every coupling is still {c}: the agreements added to b are too small to move them.",
                k=t_ + 1,
                c=f"{maps.max():.{d}f}",
            )
        )
    else:
        c = tr.c[t_, :, j]
        v = dict(
            k=t_ + 1,
            span=span_words(float(maps.min()), float(maps.max()), tr.uniform, d),
            name=name,
            lo=f"{maps[j].min():.{d}f}",
            hi=f"{maps[j].max():.{d}f}",
            c_lo=f"{c.min():.{d}f}",
            c_hi=f"{c.max():.{d}f}",
            thing=thing,
        )
        if digits:
            spread = t(
                "At iteration {k} {span}. These are averages: the {name} map spans {lo} to {hi}, while its single primary "
                "capsules span {c_lo} to {c_hi} at this iteration (the detailed map below shows them). Positions over blank "
                "background vote too: a bright square there means those primary capsules' predictions happen to agree with "
                "that {thing}, not that ink is there.",
                **v,
            )
        else:
            spread = t(
                "At iteration {k} {span}. These are averages: the {name} map spans {lo} to {hi}, while its single primary "
                "capsules span {c_lo} to {c_hi} at this iteration (the detailed map below shows them). Positions over blank "
                "background vote too: a bright square there means those primary capsules' predictions happen to agree with "
                "that {thing}, not that the object is there.",
                **v,
            )
    if tr.softmax == "inputs":
        caption = t(
            "Each small map is one {capsule}; {where}. Brighter means that {capsule} draws a larger share of its input from "
            "that position (this model's couplings sum to 1 over the input capsules for each class). {spread}",
            capsule=capsule,
            where=where,
            spread=spread,
        )
    else:
        caption = t(
            "Each small map is one {capsule}; {where}. Brighter means that position sends a larger share of its vote to that "
            "{thing}. {spread}",
            capsule=capsule,
            where=where,
            thing=thing,
            spread=spread,
        )
    return title, caption


def unplaced_words(tr: DynamicTrace, t_: int, capsule: str, thing: str) -> tuple[str, str]:
    """For primary capsules on no grid (a layout without one): the title and caption of the heatmap
    of every capsule's coupling to every class at iteration t_ (a column per capsule in the model's
    order, a row per class), with the span of the couplings it draws."""
    values = tr.c[t_]  # (I, J)
    d = _digits(tr)
    title = t("Iteration {k}: couplings c", k=t_ + 1)
    if flat(values):
        spread = (
            t("At iteration 1 every coupling is {c}: nothing has been routed yet.", c=f"{values.max():.{d}f}")
            if t_ == 0
            else t(
                "At iteration {k} every coupling is still {c}: the agreements added to b are too small to move them.",
                k=t_ + 1,
                c=f"{values.max():.{d}f}",
            )
        )
    else:
        spread = t("At iteration {k} {span}.", k=t_ + 1, span=span_words(float(values.min()), float(values.max()), tr.uniform, d))
    if tr.softmax == "inputs":
        caption = t(
            "Each column is one of the {I} primary capsules, in the model's order, and each row one {capsule}: brighter means "
            "that {capsule} draws a larger share of its input from that primary capsule (this model's couplings sum to 1 over "
            "the input capsules for each class). {spread}",
            I=values.shape[0],
            capsule=capsule,
            spread=spread,
        )
    else:
        caption = t(
            "Each column is one of the {I} primary capsules, in the model's order, and each row one {capsule}: brighter means "
            "that primary capsule sends a larger share of its vote to that {thing}. {spread}",
            I=values.shape[0],
            capsule=capsule,
            thing=thing,
            spread=spread,
        )
    return title, caption


def detail_words(tr: DynamicTrace, t_: int, j: int, name: str) -> tuple[str, str]:
    """The detailed map's title and caption: every primary capsule's coupling to class j at iteration t_."""
    values = tr.c[t_, :, j]
    d = _digits(tr)
    title = t("Coupling to {name}, iteration {k}", name=name, k=t_ + 1)
    if tr.layout.grouping == "paper":
        what = t(
            "One square per primary capsule, not averaged: a column per position on the {G}x{G} grid, row by row (1 = row 1, "
            "col 1 at the top left; {G2} = row {G}, col {G}), a row per capsule type; hover for its type, row and column.",
            G=tr.layout.grid,
            G2=tr.layout.grid * tr.layout.grid,
        )
    else:
        what = t(
            "One square per primary capsule, not averaged, in the model's own order, {G2} to a row.", G2=tr.layout.grid * tr.layout.grid
        )
    if np.ptp(values) < 1e-6:
        return title, t("{what} At iteration {k} every one is {c}.", what=what, k=t_ + 1, c=f"{values.max():.{d}f}")
    span = span_words(float(values.min()), float(values.max()), tr.uniform, d)
    return title, t("{what} At iteration {k} {span}.", what=what, k=t_ + 1, span=span)


def capsule_axes(tr: DynamicTrace) -> tuple[str, str]:
    """The detailed maps' x and y axis titles (`DynamicTrace.by_capsule`), counted from 1."""
    G2 = tr.layout.grid * tr.layout.grid
    if tr.layout.grouping == "paper":
        return t("position 1-{G2}, row by row", G2=G2), t("capsule type")
    return t("capsule, {G2} to a row", G2=G2), t("row")


def capsule_name(kind: int, row: int, col: int) -> str:
    """A primary capsule by type, row and column (0-based in), counted from 1 as the guided tour names it."""
    return t("type {kind} at row {row}, col {col}", kind=kind + 1, row=row + 1, col=col + 1)


def capsule_labels(tr: DynamicTrace) -> dict:
    """The detailed maps' axis values (from 1) and each square's name for the hover, laid out as
    `DynamicTrace.by_capsule` lays out the values (a new copy: the caller may change it)."""
    G2 = tr.layout.grid * tr.layout.grid
    rows = tr.layout.types if tr.layout.grouping == "paper" else tr.c.shape[1] // G2
    x, y, names = _labels(tr.layout.grouping == "paper", tr.layout.grid, rows, language())
    return {"x": list(x), "y": list(y), "hover": [list(row) for row in names]}


@functools.lru_cache(maxsize=64)
def _labels(paper: bool, G: int, rows: int, lang: str) -> tuple[tuple, tuple, tuple]:
    """capsule_labels' values for one grid and one language (`lang`: the one t() speaks now), made once."""
    G2 = G * G
    if paper:
        names = tuple(tuple(capsule_name(k, p // G, p % G) for p in range(G2)) for k in range(rows))
    else:
        names = tuple(tuple(t("capsule {i}", i=r * G2 + p + 1) for p in range(G2)) for r in range(rows))
    return tuple(range(1, G2 + 1)), tuple(range(1, rows + 1)), names
