"""The zoo's model cards: every number a card quotes, and its words, from one place.

A model's size is counted once (`parameter_counts`), with and without its decoder, for the zoo and
the tour alike; the paper's figure comes from the one table of published errors
(capsviz.analysis.reproduction.PAPER); guessing at random from capsviz.analysis.rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from capsviz.analysis.reproduction import PAPER, _key, is_paper_size, paper_error
from capsviz.analysis.rules import guessing_words
from capsviz.config import DATASETS, ModelConfig
from capsviz.glossary import class_words
from capsviz.i18n import tn
from capsviz.registry import FAMILIES, ROUTINGS
from capsviz.schema import CheckpointMeta

# The home page's opening: the papers' intent for a capsule's length and direction said as intent;
# whether a trained model's lengths behave so is measured elsewhere (the tour's primary-capsule step
# counts how many are longer than 0.9), so nothing here states it as a fact of the models.
INTRO = (
    "A **capsule** is a group of neurons whose output is a vector. The papers mean its **length** to represent the "
    "probability that an entity (a digit, a stroke) is present, and its **direction** to encode how it looks "
    "(thickness, slant, width). Training checks the first only for the class capsules: the margin loss pushes the "
    "label's capsule above 0.9 and the others below 0.1. For the primary capsules nothing does, and the **tour** "
    "measures what a trained model makes of it (at its primary-capsule step: how many are longer than 0.9 for the image it "
    "follows). The *squash* non-linearity (Eq. 1 of Sabour et al. 2017) keeps the direction and maps any length into "
    "[0, 1): short vectors shrink towards 0, long ones approach 1."
)


@dataclass(frozen=True)
class Size:
    """A model's number of parameters without its decoder (the size the papers quote) and with it."""

    without_decoder: int
    with_decoder: int  # the same number for a model without a decoder

    def words(self) -> str:
        """'161,824 without the decoder, 1,573,168 with', or one number for a model with no decoder."""
        if self.with_decoder == self.without_decoder:
            return f"{self.without_decoder:,} (no decoder)"
        return f"{self.without_decoder:,} without the decoder, {self.with_decoder:,} with"


def parameter_counts(model: torch.nn.Module) -> Size:
    """The size of a built model: its parameters, and those outside its decoder."""
    every = [(n, p.numel()) for n, p in model.named_parameters()]
    return Size(sum(k for n, k in every if not n.startswith("decoder.")), sum(k for _, k in every))


def model_size(config: ModelConfig) -> Size:
    """The size of the model `config` describes, built on PyTorch's meta device (no memory, no weights)."""
    from capsviz.models import build_model

    with torch.device("meta"):
        return parameter_counts(build_model(config))


def card_routing(c: ModelConfig) -> str:
    """How a model's capsules are routed, in a few words: its routing's own card words
    (capsviz.entries.Routing.card), with its iterations where the routing iterates."""
    if c.routing is None:
        return FAMILIES[c.family].unrouted
    kind = getattr(c, "couplings", c.routing)  # a CapsNet may be trained with other couplings than dynamic routing's
    r = ROUTINGS.get(kind)
    if r is None:
        return kind
    if not r.iterative:
        return r.card or r.words
    n = c.routing_iterations
    if n == 1 and r.one_iteration:
        return r.one_iteration
    return tn("{routing}, {n} iteration", "{routing}, {n} iterations", n, routing=r.card or r.words)


def classes_line(names, size: int, channels: int) -> str:
    """A user's model in a line: its classes and the images it reads."""
    shown = ", ".join(map(str, names[:8])) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return f"{len(names)} classes: {shown}; {size}x{size} {'colour' if channels == 3 else 'grey'} images"


def paper_words(meta: CheckpointMeta) -> str:
    """The published test error for a model's setting, and whether this model has the paper's size."""
    paper = paper_error(meta)
    smaller = "" if is_paper_size(meta) else "; this one is smaller"
    if paper is None:
        family, dataset, iterations, reconstruction = _key(meta)
        other = [k for k in PAPER if k[:2] == (family, dataset) and k[3] == reconstruction]  # the paper's model, other iterations
        if not other or iterations is None:
            return "no paper figure for this setting"
        k = other[0]
        return (
            f"paper: {PAPER[k]}% for the full-size model with {k[2]} routing iterations{smaller}, "
            f"with {iterations} iteration{'' if iterations == 1 else 's'}"
        )
    if smaller:
        return f"paper: {paper}% for the full-size model{smaller}"
    return f"paper: {paper}%"


def guesses(meta: CheckpointMeta) -> tuple[int, int]:
    """(classes, labels per image) of a model: what guessing at random is counted from."""
    found = DATASETS.get(meta.dataset)
    return meta.config.num_classes, found.labels if found is not None else 1


def _runs(meta: CheckpointMeta) -> list[dict]:
    """The training runs in a checkpoint's record, oldest first (a fine-tuned model: the runs it continued)."""
    chain, m = [], meta.raw
    while isinstance(m, dict) and len(chain) < 100:
        chain.append(m)
        m = m.get("started_from")
    return chain[::-1]


def epochs_note(meta: CheckpointMeta) -> str | None:
    """What the card's epochs mean where they are not whole planned runs: an epoch is one pass over
    the training images, counted as images seen / training images, so a run stopped before the
    epochs it was planned for ends on a fraction. None where every run did its whole plan."""
    runs = []
    for m in _runs(meta):
        done, planned = m.get("epochs"), (m.get("run") or {}).get("epochs")
        if isinstance(done, int | float):
            runs.append((float(done), planned if isinstance(planned, int | float) else None))
    stopped = [(d, p) for d, p in runs if (p is not None and d < p) or d != round(d)]
    if not stopped:
        return None
    what = "An epoch is one pass over the training images; the count is images seen / training images, so a run stopped partway through an epoch ends on a fraction. "
    if len(runs) == 1:
        d, p = runs[0]
        return what + f"This run was stopped after {d:.1f} of the {p:g} epochs it was planned for." if p else what
    listed = ", ".join(f"{d:.1f} of {p:g} planned" if p else f"{d:.1f}" for d, p in runs)
    return (
        what + f"Fine-tuned: {len(runs)} runs, each starting from the weights the one before ended with ({listed}); the total adds them up."
    )


PAIR_ERROR = (
    "Pair error: the share of test pairs (two overlapping digits) not read whole, 100% - pair accuracy; a pair counts as "
    "read only when both its digits are among the two longest capsules. (The routing lab's digit error of this model "
    "counts single digits instead, so it is lower.)"
)


def error_words(meta: CheckpointMeta) -> tuple[str, str]:
    """(name, definition) of the error a card quotes: the pair error for a model that reads two
    labels per image (MultiMNIST), else the test error on one label per image."""
    if guesses(meta)[1] == 2:
        return "Pair error", PAIR_ERROR
    return (
        "Test error",
        f"Test error: the share of test images whose longest {'capsule' if meta.config.routing is not None else 'score'} is not their label.",
    )


@dataclass(frozen=True)
class Card:
    """What a zoo card says about one model."""

    family: str
    routing: str
    decoder: str
    size: Size
    error: str  # "0.38%" or "not measured"
    error_name: str  # what the error counts: "Test error", or "Pair error" for a model that reads two digits at once
    error_means: str  # its definition, said beside the number
    guessing: str | None  # the error against guessing at random (rules.guessing_words); None when not measured
    paper: str


def card(meta: CheckpointMeta, size: Size | None = None) -> Card:
    """A checkpoint's card (`size`: counted already, else from its config)."""
    c, m = meta.config, meta.metrics
    decoder = f"yes: it can redraw the {class_words(meta).shown} from a capsule" if c.decodes else "no"
    guessing = guessing_words(m.test_error, m.n_test or 0, *guesses(meta)) if m.measured and m.n_test else None
    return Card(
        family=FAMILIES[c.family].title,
        routing=card_routing(c),
        decoder=decoder,
        size=size or model_size(c),
        error=f"{m.test_error:.2f}%" if m.measured else "not measured",
        **dict(zip(("error_name", "error_means"), error_words(meta), strict=True)),
        guessing=guessing,
        paper=paper_words(meta),
    )
