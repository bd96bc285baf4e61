"""The guided tour: one image followed through a trained model, step by step, by its family's own
tour (capsviz/families/NAME/tour.py, named by the family's registry entry).

Everything a step shows comes from the model's own layers and routing functions run once on the
image, with every routing iteration recorded; the page only picks what to draw. The steps' shared
machinery and words are capsviz.analysis.steps.
"""

from __future__ import annotations

from capsviz.analysis.steps import Step, Tour
from capsviz.glossary import ClassWords
from capsviz.registry import FAMILIES


def tour_of(config) -> Tour | None:
    """The tour of a model of this config: its family's (capsviz.entries.Family.tour); None for a
    family no tour follows."""
    entry = FAMILIES.get(getattr(config, "family", None))
    return entry.guided_tour if entry is not None else None


def walk(trace, names: list[str], words: ClassWords, model_name: str, truth: str, looks: str, lab_rows: list, config=None) -> list[Step]:
    """Every step of `trace` (what a family's `Tour.follow` returned) as the page shows it, by the
    walk of the family whose trace it is. `names`: the class names; `truth`: the image's label;
    `looks`: what the input is; `lab_rows`: the routing lab's stored rows for this model
    (capsviz.analysis.lab.stored_rows); `config`: the model's, which says what it was trained with."""
    for entry in FAMILIES.values():
        tour = entry.guided_tour
        if tour is not None and isinstance(trace, tour.trace):
            return tour.walk(trace, names, words, model_name, truth, looks, lab_rows, config)
    raise TypeError(f"no family's tour traced a {type(trace).__name__}")
