"""How long a long computation still needs, in words, from the rate measured so far."""

from __future__ import annotations


def time_left(done: int, total: int, elapsed: float) -> str:
    """', about 40 s left' from the rate so far; nothing before the first step is measured, or after the last."""
    if done <= 0 or done >= total:
        return ""
    left = elapsed / done * (total - done)
    return f", about {left:.0f} s left" if left < 90 else f", about {left / 60:.0f} min left"
