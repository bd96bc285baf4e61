"""How long a long computation still needs, in words, from the rate measured so far."""

from __future__ import annotations

from capsviz.i18n import t


def seconds_left(done: int, total: int, elapsed: float) -> float | None:
    """The seconds still needed at the rate so far; None before the first step is measured, or after the last."""
    if done <= 0 or done >= total:
        return None
    return elapsed / done * (total - done)


def progress_words(label: str, done: int, total: int, elapsed: float) -> str:
    """ "Routing: 25 / 100, about 30 s left" in the reader's language, the time left from the rate so
    far; without it before the first step is measured, or after the last."""
    left = seconds_left(done, total, elapsed)
    if left is None:
        return t("{label}: {done} / {total}", label=label, done=done, total=total)
    if left < 90:
        return t("{label}: {done} / {total}, about {seconds} s left", label=label, done=done, total=total, seconds=f"{left:.0f}")
    return t("{label}: {done} / {total}, about {minutes} min left", label=label, done=done, total=total, minutes=f"{left / 60:.0f}")


def duration(seconds: float) -> str:
    """Plain words for a time in the reader's language: "45 s", "6.2 min", "1.5 h"."""
    if seconds < 90:
        return t("{value} s", value=f"{seconds:.0f}")
    if seconds < 90 * 60:
        return t("{value} min", value=f"{seconds / 60:.1f}")
    return t("{value} h", value=f"{seconds / 3600:.1f}")
