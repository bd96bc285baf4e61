"""What the EM and MultiMNIST pages both say: a grid position in words, and a scale's top rounded up."""

from __future__ import annotations

import numpy as np

from capsviz.i18n import t


def round_up(x: float, digits: int = 2) -> float:
    """x rounded up to `digits` significant digits: a limit that reads as it is and holds x."""
    if x <= 0:
        return 0.0
    step = 10.0 ** (np.floor(np.log10(x)) - digits + 1)
    return float(f"{np.ceil(x / step - 1e-9) * step:.{digits}g}")  # the float that prints as the rounded number


def position_words(pos: int, n: int) -> str:
    """A row-major position index in words: 'row 2, column 3 of the 6 x 6 grid (from the top left)'."""
    if not 0 <= pos < n * n:
        raise ValueError(f"position {pos} is outside the {n} x {n} grid (0 to {n * n - 1})")
    return t("row {row}, column {col} of the {n} x {n} grid", row=pos // n + 1, col=pos % n + 1, n=n)
