"""What a model's config may hold: the bounds every family shares, and `bounded`, the dataclass
field that declares its own bounds once.

A family's config (capsviz/families/NAME/config.py) declares each field's bounds beside its
default; capsviz.schema derives the table every checkpoint file is checked against from them, so
no field is written twice.
"""

from __future__ import annotations

from dataclasses import field

MAX_ITERATIONS = 20  # routing iterations accepted anywhere: the pages offer 1-10; each is a full pass over the votes
# Sides accepted for a model's input (--resize, a user's images): MNIST's 28 up to ImageNet-sized
# pictures; what memory allows at a given batch is decided by capsviz.estimate, not here.
MIN_SIZE, MAX_SIZE = 8, 512


def bounded(default, *, lo=None, hi=None, choices=None):
    """A config field with its default and what a checkpoint file may hold for it: a number in
    [lo, hi] (each item of a tuple too, whose length is the default's), or one of `choices` (a
    tuple, or a function read at each check, as the registered routings are). A bool or a free
    string needs neither."""
    return field(default=default, metadata={"lo": lo, "hi": hi, "choices": choices})
