"""A shared link's numbers (?image=, ?iterations=, ?step=, ...) brought within what a page shows.

A link is typed, pasted, edited and cut short by people: a value a page cannot show is not
dropped in silence but brought into range, and the page says what the link asked for and what it
shows instead (`Linked.note`, plain text: the page makes it plain, since it quotes the link).
"""

from __future__ import annotations

import math
from typing import NamedTuple


class Linked(NamedTuple):
    value: int | float | tuple[float, ...]  # what the page shows
    note: str | None  # None when the link's value is shown as it is


def _number(v: float) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:g}"


def linked(raw: str, lo: float, hi: float, default: float, what: str, whole: bool = True) -> Linked:
    """The link's value `raw` for a setting between `lo` and `hi` (`whole`: a whole number), and a
    note when it cannot be shown as it is: malformed gives `default`, out of range the nearest end.
    `what` names the setting in the note ("test image", "routing iterations")."""
    cast = int if whole else float
    text = raw.strip()
    try:
        number = float(text)
        ok = math.isfinite(number) and (not whole or number == int(number))
    except ValueError:
        ok = False
    if not ok:
        kind = "a whole number" if whole else "a number"
        shown = cast(default)
        note = f"The link asks for {what} “{text}”, which is not {kind}; this page shows {what} {_number(shown)}."
        return Linked(shown, note)
    value = cast(number)
    if lo <= value <= hi:
        return Linked(value, None)
    shown = cast(lo if value < lo else hi)
    bound = f"the smallest is {_number(cast(lo))}" if value < lo else f"the largest is {_number(cast(hi))}"
    note = f"The link asks for {what} {_number(value)}, but here {bound}; this page shows {what} {_number(shown)}."
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
            said.append(f"The link asks for d{d} {got.value:g}; the sliders move in steps of {step:g}, so this page shows d{d} {value:g}.")
        elif got.note:  # out of range gives an end, on the steps
            said.append(got.note)
        values.append(value)
    values += [0.0] * (n - len(values))
    if len(parts) > n:
        said.append(f"The link gives {len(parts)} offsets; a capsule has {n} dimensions, so the last {len(parts) - n} are left out.")
    return Linked(tuple(values), " ".join(said) or None)
