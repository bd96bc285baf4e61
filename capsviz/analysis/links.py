"""A shared link's numbers (?image=, ?iterations=, ?step=, ...) brought within what a page shows.

A link is typed, pasted, edited and cut short by people: a value a page cannot show is not
dropped in silence but brought into range, and the page says what the link asked for and what it
shows instead (`Linked.note`, plain text: the page makes it plain, since it quotes the link). Each
note is one message of the catalog in the reader's language (capsviz.i18n); `what` names the
setting in that language too.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from capsviz.i18n import LANGUAGES, gap, speaking, t


class Linked(NamedTuple):
    value: int | float | tuple[float, ...]  # what the page shows
    note: str | None  # None when the link's value is shown as it is


def _number(v: float) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:g}"


def linked(raw: str, lo: float, hi: float, default: float, what: str, whole: bool = True) -> Linked:
    """The link's value `raw` for a setting between `lo` and `hi` (`whole`: a whole number), and a
    note when it cannot be shown as it is: no number gives `default`, a fraction for a whole number
    its whole part (as Streamlit reads a link's ?right=1.5), out of range the nearest end. `what`
    names the setting in the note ("test image", "routing iterations")."""
    cast = int if whole else float
    text = raw.strip()
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        shown = cast(default)
        note = t(
            "The link asks for {what} “{text}”, which is not a number; this page shows {what} {shown}.",
            what=what,
            text=text,
            shown=_number(shown),
        )
        return Linked(shown, note)
    value = cast(number)
    if lo <= value <= hi and value == number:
        return Linked(value, None)
    shown = cast(min(max(value, lo), hi))
    v = dict(what=what, shown=_number(shown))
    asked = _number(value) if value == number else f"{number:g}"
    if value < lo:
        note = t(
            "The link asks for {what} {asked}, but here the smallest is {lo}; this page shows {what} {shown}.",
            asked=asked,
            lo=_number(cast(lo)),
            **v,
        )
    elif value > hi:
        note = t(
            "The link asks for {what} {asked}, but here the largest is {hi}; this page shows {what} {shown}.",
            asked=asked,
            hi=_number(cast(hi)),
            **v,
        )
    else:
        note = t("The link asks for {what} {asked}, which is not a whole number; this page shows {what} {shown}.", asked=f"{number:g}", **v)
    return Linked(shown, note)


def linked_offsets(raw: str, n: int, limit: float, step: float) -> Linked:
    """A link's comma-separated offsets (the explorer's ?dims=) as a tuple of `n`, each within
    [-limit, limit] and on the sliders' `step`; missing ones are 0. One note lists every offset
    shown otherwise than asked, and offsets beyond the `n`-th, which are left out."""
    parts = raw.split(",") if raw.strip() else []
    values, said = [], []
    for d, part in enumerate(parts[:n]):
        got = linked(part, -limit, limit, 0.0, f"d{d}", whole=False)
        value = round(round(got.value / step) * step, 2) + 0.0  # + 0.0: no -0
        if got.note is None and not math.isclose(value, got.value, abs_tol=1e-9):
            said.append(
                t(
                    "The link asks for d{d} {asked}; the sliders move in steps of {step}, so this page shows d{d} {shown}.",
                    d=d,
                    asked=f"{got.value:g}",
                    step=f"{step:g}",
                    shown=f"{value:g}",
                )
            )
        elif got.note:  # out of range gives an end, on the steps
            said.append(got.note)
        values.append(value)
    values += [0.0] * (n - len(values))
    if len(parts) > n:
        said.append(
            t(
                "The link gives {given} offsets; a capsule has {n} dimensions, so the last {extra} are left out.",
                given=len(parts),
                n=n,
                extra=len(parts) - n,
            )
        )
    return Linked(tuple(values), gap().join(said) or None)


def chosen(raw: str, choices, default, what: str, name=str) -> Linked:
    """The link's value `raw` for a setting that takes one of `choices` (as the link writes them:
    str(choice)), and a note giving `default` when it names none of them; the note calls each
    choice by `name(choice)` (by default as the link writes it)."""
    text = raw.strip()
    for c in choices:
        if str(c) == text:
            return Linked(c, None)
    note = t(
        "The link asks for {what} “{text}”, which this page does not offer ({offered}); this page shows “{shown}”.",
        what=what,
        text=text,
        offered=t(", ").join(name(c) for c in choices),
        shown=name(default),
    )
    return Linked(default, note)


def named(raw: str, choices, words):
    """The choice that a link's value `raw` names, or None: by its stable key (str(choice), what the
    address holds) or by `words(choice)`, the words a widget shows for it, in any language capsviz
    speaks (a link copied from a page in English opened in Japanese, or one written before the
    address held keys)."""
    text = raw.strip()
    for c in choices:
        if str(c) == text:
            return c
    for lang in LANGUAGES:
        with speaking(lang):
            for c in choices:
                if words(c) == text:
                    return c
    return None


def linked_numbers(raw: str, parts: list[tuple[int, int, str]], fallback) -> Linked:
    """A link's comma-separated whole numbers (MultiMNIST's ?pair=), the k-th brought within
    `parts[k]` = (lo, hi, what) (a malformed one gives fallback[k]); a link with another count
    of numbers gives `fallback` whole. One note says everything shown otherwise than asked."""
    items = raw.split(",")
    if len(items) != len(parts):
        note = t(
            "The link asks for “{raw}”, which is not {n} numbers ({names}); this page shows {shown}.",
            raw=raw.strip(),
            n=len(parts),
            names=t(", ").join(what for *_, what in parts),
            shown=t(", ").join(map(str, fallback)),
        )
        return Linked(tuple(fallback), note)
    got = [linked(x, lo, hi, d, what) for x, (lo, hi, what), d in zip(items, parts, fallback, strict=True)]
    return Linked(tuple(g.value for g in got), gap().join(g.note for g in got if g.note) or None)


def several(raws: list[str], choices, default: list, what: str) -> Linked:
    """A link's values for a setting that takes several of `choices` (a multiselect's repeated
    ?param=a&param=b, each as str(choice)): those that name a choice, once each, in the link's
    order; `default` where none does. One note names the values left out and what is shown."""
    names = [str(c) for c in choices]
    kept = list(dict.fromkeys(r for r in raws if r in names))
    odd = list(dict.fromkeys(r for r in raws if r not in names))
    shown = [choices[names.index(k)] for k in kept] or list(default)
    if not odd:
        return Linked(tuple(shown), None)
    quoted = lambda words: t("“{words}”", words=words)  # noqa: E731 - a choice's words may hold a comma
    note = t(
        "The link asks for {what} {asked}, which this page does not offer ({offered}); this page shows {what} {listed}.",
        what=what,
        asked=t(", ").join(quoted(r.strip()) for r in odd),
        offered=t(", ").join(quoted(n) for n in names),
        listed=t(", ").join(quoted(s) for s in shown) or t("none"),
    )
    return Linked(tuple(shown), note)


def unread(raw: str, what: str, shown: str) -> str:
    """The note for a link's value that the page cannot read at all (the playground's ?pts=, made
    for a preset of another size or cut short): what it asked for and what is `shown` instead."""
    return t(
        "The link asks for {what} “{raw}”, which this page cannot read; this page shows {shown}.", what=what, raw=raw.strip(), shown=shown
    )
