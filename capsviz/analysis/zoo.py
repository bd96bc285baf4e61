"""The zoo's model cards: every number a card quotes, and its words, from one place.

A model's size is counted once (`parameter_counts`), with and without its decoder, for the zoo and
the tour alike; the paper's figure comes from the one table of published errors
(capsviz.analysis.reproduction.PAPER); guessing at random from capsviz.analysis.rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from capsviz.analysis.reproduction import PAPER, _key, is_paper_size, paper_error
from capsviz.analysis.rule_words import guessing_words
from capsviz.config import DATASETS, ModelConfig
from capsviz.glossary import class_words
from capsviz.i18n import N_, t, tn
from capsviz.registry import FAMILIES, ROUTINGS
from capsviz.schema import CheckpointMeta

# The home page's opening: the papers' intent for a capsule's length and direction said as intent;
# whether a trained model's lengths behave so is measured elsewhere (the tour's primary-capsule step
# counts how many are longer than 0.9), so nothing here states it as a fact of the models.
INTRO = N_(
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
            return t("{n} (no decoder)", n=f"{self.without_decoder:,}")
        return t("{without} without the decoder, {whole} with", without=f"{self.without_decoder:,}", whole=f"{self.with_decoder:,}")


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
        return t(FAMILIES[c.family].unrouted)
    kind = getattr(c, "couplings", c.routing)  # a CapsNet may be trained with other couplings than dynamic routing's
    r = ROUTINGS.get(kind)
    if r is None:
        return kind
    if not r.iterative:
        return t(r.card or r.words)
    n = c.routing_iterations
    if n == 1 and r.one_iteration:
        return t(r.one_iteration)
    return tn("{routing}, {n} iteration", "{routing}, {n} iterations", n, routing=t(r.card or r.words))


def classes_line(names, size: int, channels: int) -> str:
    """A user's model in a line: its classes and the images it reads."""
    shown = t(", ").join(map(str, names[:8]))
    if len(names) > 8:
        shown = t("{listed} and {n} more", listed=shown, n=len(names) - 8)
    if channels == 3:
        return t("{n} classes: {names}; {size}x{size} colour images", n=len(names), names=shown, size=size)
    return t("{n} classes: {names}; {size}x{size} grey images", n=len(names), names=shown, size=size)


def paper_words(meta: CheckpointMeta) -> str:
    """The published test error for a model's setting, and whether this model has the paper's size."""
    paper = paper_error(meta)
    full = is_paper_size(meta)
    if paper is None:
        family, dataset, iterations, reconstruction = _key(meta)
        other = [k for k in PAPER if k[:2] == (family, dataset) and k[3] == reconstruction]  # the paper's model, other iterations
        if not other or iterations is None:
            return t("no paper figure for this setting")
        k = other[0]
        v = dict(paper=PAPER[k], k=k[2])
        couplings = getattr(meta.config, "couplings", None)
        if couplings in ROUTINGS and not ROUTINGS[couplings].iterative:  # uniform or random couplings: a baseline that never routes
            if full:
                return t(
                    "paper: {paper}% for the full-size model with {k} routing iterations; this one has its size and is not routed", **v
                )
            return t("paper: {paper}% for the full-size model with {k} routing iterations; this one is smaller and is not routed", **v)
        if full:
            return tn(
                "paper: {paper}% for the full-size model with {k} routing iterations; this one has its size, with {n} iteration",
                "paper: {paper}% for the full-size model with {k} routing iterations; this one has its size, with {n} iterations",
                iterations,
                **v,
            )
        return tn(
            "paper: {paper}% for the full-size model with {k} routing iterations; this one is smaller, with {n} iteration",
            "paper: {paper}% for the full-size model with {k} routing iterations; this one is smaller, with {n} iterations",
            iterations,
            **v,
        )
    if not full:
        return t("paper: {paper}% for the full-size model; this one is smaller", paper=paper)
    return t("paper: {paper}%", paper=paper)


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
    what = t(
        "An epoch is one pass over the training images; the count is images seen / training images, so a run stopped partway "
        "through an epoch ends on a fraction."
    )
    if len(runs) == 1:
        d, p = runs[0]
        if not p:
            return what
        more = t("This run was stopped after {done} of the {planned} epochs it was planned for.", done=f"{d:.1f}", planned=f"{p:g}")
        return t("{said} {more}", said=what, more=more)
    listed = t(", ").join(t("{done} of {planned} planned", done=f"{d:.1f}", planned=f"{p:g}") if p else f"{d:.1f}" for d, p in runs)
    more = t(
        "Fine-tuned: {n} runs, each starting from the weights the one before ended with ({listed}); the total adds them up.",
        n=len(runs),
        listed=listed,
    )
    return t("{said} {more}", said=what, more=more)


PAIR_ERROR = N_(
    "Pair error: the share of test pairs (two overlapping digits) not read whole, 100% - pair accuracy; a pair counts as "
    "read only when both its digits are among the two longest capsules. (The routing lab's digit error of this model "
    "counts single digits instead, so it is lower.)"
)


def error_words(meta: CheckpointMeta) -> tuple[str, str]:
    """(name, definition) of the error a card quotes: the pair error for a model that reads two
    labels per image (MultiMNIST), else the test error on one label per image."""
    if guesses(meta)[1] == 2:
        return t("Pair error"), t(PAIR_ERROR)
    if meta.config.routing is None:
        return t("Test error"), t("Test error: the share of test images whose highest score is not their label.")
    return t("Test error"), t("Test error: the share of test images whose longest capsule is not their label.")


@dataclass(frozen=True)
class Card:
    """What a zoo card says about one model, in the language it was made in."""

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
    decoder = t("yes: it can redraw the {shown} from a capsule", shown=class_words(meta).shown) if c.decodes else t("no")
    guessing = guessing_words(m.test_error, m.n_test or 0, *guesses(meta)) if m.measured and m.n_test else None
    return Card(
        family=t(FAMILIES[c.family].title),
        routing=card_routing(c),
        decoder=decoder,
        size=size or model_size(c),
        error=f"{m.test_error:.2f}%" if m.measured else t("not measured"),
        **dict(zip(("error_name", "error_means"), error_words(meta), strict=True)),
        guessing=guessing,
        paper=paper_words(meta),
    )
