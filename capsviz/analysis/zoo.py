"""The zoo's model cards: every number a card quotes, and its words, from one place.

A model's size is counted once (`parameter_counts`), with and without its decoder, for the zoo and
the tour alike; the paper's figure comes from the one table of published errors
(capsviz.analysis.reproduction.PAPER); chance from capsviz.analysis.rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from capsviz.analysis.reproduction import is_paper_size, paper_error
from capsviz.analysis.rules import chance_words
from capsviz.config import DATASETS, ModelConfig
from capsviz.glossary import class_words
from capsviz.schema import CheckpointMeta

FAMILIES = {
    "capsnet": "CapsNet (vector capsules)",
    "matrix": "matrix capsules (4x4 poses)",
    "efficient": "Efficient-CapsNet (vector capsules)",
    "cnn": "plain CNN (no capsules)",
}


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


def routing_words(c: ModelConfig) -> str:
    """How a model's capsules are routed, in a few words."""
    if c.routing is None:
        return "none (CNN)"
    kind = getattr(c, "couplings", c.routing)  # a CapsNet may be trained with other couplings than dynamic routing's
    if kind == "self-attention":
        return "self-attention, one pass"
    if kind in ("uniform", "random"):
        return f"{kind} couplings: no routing (a baseline)"
    n = c.routing_iterations
    return f"{'EM' if kind == 'em' else 'dynamic'}, {n} iteration" + ("" if n == 1 else "s")


def classes_line(names, size: int, channels: int) -> str:
    """A user's model in a line: its classes and the images it reads."""
    shown = ", ".join(map(str, names[:8])) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return f"{len(names)} classes: {shown}; {size}x{size} {'colour' if channels == 3 else 'grey'} images"


def paper_words(meta: CheckpointMeta) -> str:
    """The published test error for a model's setting, and whether this model has the paper's size."""
    paper = paper_error(meta)
    if paper is None:
        return "no paper figure for this setting"
    if is_paper_size(meta):
        return f"paper: {paper}%"
    return f"paper: {paper}% for the full-size model; this one is smaller"


def guesses(meta: CheckpointMeta) -> tuple[int, int]:
    """(classes, labels per image) of a model: what its chance is counted from."""
    found = DATASETS.get(meta.dataset)
    return meta.config.num_classes, found.labels if found is not None else 1


@dataclass(frozen=True)
class Card:
    """What a zoo card says about one model."""

    family: str
    routing: str
    decoder: str
    size: Size
    error: str  # "0.38%" or "not measured"
    chance: str | None  # the error against chance (rules.chance_words); None when not measured
    paper: str


def card(meta: CheckpointMeta, size: Size | None = None) -> Card:
    """A checkpoint's card (`size`: counted already, else from its config)."""
    c, m = meta.config, meta.metrics
    decoder = f"yes: it can redraw the {class_words(meta).shown} from a capsule" if c.decodes else "no"
    chance = chance_words(m.test_error, m.n_test or 0, *guesses(meta)) if m.measured and m.n_test else None
    return Card(
        family=FAMILIES.get(c.family, c.family),
        routing=routing_words(c),
        decoder=decoder,
        size=size or model_size(c),
        error=f"{m.test_error:.2f}%" if m.measured else "not measured",
        chance=chance,
        paper=paper_words(meta),
    )
