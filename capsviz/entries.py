"""What an entry of capsviz.registry is: a routing (`Routing`) or a model family (`Family`), each
carrying its words and the hooks the rest of capsviz calls, and `resolve`, which reads a hook.

A hook is named "module:attribute" and imported when first used, so an entry imports nothing of
capsviz and a family's folder can hold its entry beside the code it names; a test may give a
callable or a class directly. `Family.missing` lists the hooks an entry lacks for the pages it
claims, so a new family fails one test naming each. `Layout` is what a family's `layout` hook
answers: where its primary capsules sit over the image.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from capsviz.i18n import N_


def resolve(ref):
    """The object `ref` names ("package.module:attribute"); anything else is returned as it is."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Routing:
    """A routing between capsule layers.

    run: "module:function" (or the callable). A vector-capsule routing (`vector`) is called as
        run(u_hat (B, J, I, D), *, iterations, prior, squash, record, dynamic) -> RoutingResult
        (capsviz.routing.route passes every keyword; each uses what it needs). EM routing takes votes
        and activations of matrix capsules instead (capsviz.routing.em_routing) and is not `vector`.
    words: its plain name for students, as the pages say it ("uniform couplings (no routing)").
    short: its name in a table's cell and the routing lab's sentences ("uniform"); empty: `name`.
    about: one sentence-part for students: how it sets the couplings ("every vote is split evenly ...").
    iterative: whether it has routing iterations (the pages' iteration slider, "n iterations").
    uniform: what "uniform" means for it: where, if ever, its couplings are the even split 1/J.
    from_votes: whether it computes the couplings from the votes (so "how far from uniform" says
        something about the image); uniform and fixed random couplings do not.
    card: how a zoo card names it: an iterative routing's card adds "N iterations" to it; empty:
        its `words`.
    one_iteration: an iterative routing's card at one iteration, where that is another routing in
        effect (dynamic routing's couplings stay uniform); empty: the card with "1 iteration".
    The words (`words`, `short`, `about`, `card`, `one_iteration`) are catalog messages (capsviz.i18n.N_),
    shown through `t`.
    copies: vote-sized tensors it keeps alive in training (capsviz.estimate counts its memory so).
    view: how the routing page shows a family that routes with it (one of ROUTING_VIEWS): "iterations",
        iteration by iteration as Procedure 1 (couplings, agreements, Appendix A's convergence:
        its function records c, b_change and v after each iteration); "attention", one pass (its
        couplings beside the learned prior, if any); empty: the routing page cannot show such a family.
    """

    name: str
    run: Callable | str
    words: str
    about: str
    iterative: bool
    uniform: str
    from_votes: bool
    vector: bool = True
    short: str = ""
    card: str = ""
    one_iteration: str = ""
    copies: int = 0
    view: str = ""

    @property
    def function(self) -> Callable:
        return resolve(self.run)


# The routing page's views of a routing (Routing.view)
ROUTING_VIEWS = ("iterations", "attention")


@dataclass(frozen=True)
class Layout:
    """Where a family's primary capsules sit over the image (its `layout` hook's answer), as the
    routing page and the static site draw them.

    grid: the side of the square grid of positions they sit on; 0 where they have no one grid
        (each sees the whole image, or they come from several grids).
    dim: the values in one primary capsule.
    types: capsules' worth of values at each position of the grid (0 without a grid).
    grouping: how a position's values make capsules: "paper", `types` whole capsules at each
        position, numbered position by position (Sabour et al.'s); "view", each capsule `dim`
        neighbouring values of one conv map, spread over the positions (capsviz import's); "" without a grid.
    place: (grid * grid, I) numpy: the share of each position's values that capsule i holds (a row
        sums to 1); None without a grid.
    about: without a grid, where the capsules come from, as one sentence the pages say instead of
        drawing a map (N_ words, "This model has no grid of positions: ..."); empty with a grid.
    """

    grid: int
    dim: int
    types: int = 0
    grouping: str = ""
    place: object = None
    about: str = ""


# The arguments of the "Why capsules" chapter a family's models can be measured on (Family.why):
# "vector", beside the baseline CNN; "matrix", the votes under a change of viewpoint
WHY_KINDS = ("vector", "matrix")

# The pages a family may claim: "routing" (vector-capsule routing), "em" (EM routing), "lab" (its
# routing can be swapped), "tour" (a tour follows it), "explorer" (with a decoder), "robustness".
PAGES = ("routing", "em", "lab", "tour", "explorer", "robustness")


@dataclass(frozen=True)
class Family:
    """A model family: one folder, capsviz/families/NAME/, whose __init__ holds this entry.

    config, model: "module:Class" (or the classes) of its config dataclass (its fields declare
        their bounds with capsviz.bounds.bounded; the checkpoint schema is derived from them) and
        its nn.Module (built as model(config=config)).
    presets: "module:NAME" of its named configs ({preset name: config}): the CLI's `--model`
        choices and the Train page's list.
    words: the family in a sentence ("a CapsNet"); short: as a name in a list ("CapsNet");
    title: in a label and on its zoo card ("CapsNet (vector capsules)"); about: one sentence for students.
    score: what its class scores are, as a figure's axis says it ("capsule length").
    routing: its routing's name in ROUTINGS, None for a model without capsules.
    unrouted: what its zoo card says of the routing of a model without one.
    pages: the pages that can show it (PAGES).
    tour: "module:TOUR" of its capsviz.analysis.steps.Tour (the trace, the steps and their words),
        for a family the tour page shows.
    votes: "module:function" counting its training memory (capsviz.estimate): called as
        votes(model, config, x, y) on PyTorch's meta device, it runs what training keeps for the
        backward pass and returns the routing votes per image; None: its whole loss is run and it
        has no votes.
    paper: its paper's published test errors (%), {(dataset, routing iterations, reconstruction): error}.
    paper_presets: the preset of its paper's model for each dataset ("*": any dataset); a model of
        another size is "smaller" on its card.
    site: "module:function" exporting its graphs for the static site (capsviz.site.export), for a
        family the site runs.
    layout: "module:function" saying where its primary capsules sit: layout(config) -> Layout, for
        a family the routing page or the static site shows.
    baseline: a model without capsules that the capsule pages set beside a capsule model (the
        robustness page's and the Why chapter's CNN: its model has `features(x)`, the maps before
        pooling, and `head(maps)`, the class scores).
    why: which argument of the "Why capsules" chapter (capsviz.analysis.why) its models are measured
        on, one of WHY_KINDS: "vector", vector capsules with a decoder set beside the baseline CNN
        (invariance against equivariance, parts in the wrong places, pose; its model has
        capsviz.models.heads.ClassCapsules' `classify` and `decode`, with `predictions` and
        `route`); "matrix", matrix capsules whose votes move together under a change of viewpoint
        (its model has Hinton et al.'s layers as capsviz.analysis.why.class_votes reads them);
        empty: none, and the chapter and the tour's first step say it cannot measure the model.
    attacks: whether its paper claims it resists white-box attacks better than a CNN (Hinton et
        al. section 6, matrix capsules): the robustness page attacks a model of it beside any
        other capsule model, so the claim is tested on the models it was made for.
    tour_terms: the glossary entries its tour's steps explain where they differ from every
        tour's (capsviz.site.STEP_TERMS): {step kind: [glossary keys]}.
    """

    name: str
    config: type | str
    model: type | str
    presets: dict | str
    words: str
    short: str
    title: str
    about: str
    score: str
    routing: str | None
    pages: frozenset[str] = field(default_factory=frozenset)
    unrouted: str = N_("none")
    tour: object | None = None
    votes: Callable | str | None = None
    paper: dict = field(default_factory=dict)
    paper_presets: dict = field(default_factory=dict)
    site: Callable | str | None = None
    layout: Callable | str | None = None
    baseline: bool = False
    why: str = ""
    attacks: bool = False
    tour_terms: dict = field(default_factory=dict)

    @property
    def config_class(self) -> type:
        return resolve(self.config)

    @property
    def model_class(self) -> type:
        return resolve(self.model)

    @property
    def preset_table(self) -> dict:
        return resolve(self.presets)

    @property
    def guided_tour(self):
        """Its tour (capsviz.analysis.steps.Tour), None for a family no tour follows."""
        return resolve(self.tour)

    def primary_layout(self, config) -> Layout:
        """Where the primary capsules of a model of this config sit (its `layout` hook)."""
        return resolve(self.layout)(config)

    def build(self, config):
        return self.model_class(config=config)

    def paper_preset(self, dataset: str | None) -> str | None:
        """The preset of the paper's model on `dataset`, None where its paper has none."""
        return self.paper_presets.get(dataset, self.paper_presets.get("*"))

    def missing(self, routings: dict) -> list[str]:
        """The hooks this entry lacks, each as "NAME: what is missing": empty for a complete entry.
        `routings`: the registered routings (capsviz.registry.ROUTINGS)."""
        out = []
        for hook in ("config", "model", "presets", "words", "short", "title", "about", "score"):
            if not getattr(self, hook):
                out.append(f"{self.name}: {hook}")
        unknown = set(self.pages) - set(PAGES)
        if unknown:
            out.append(f"{self.name}: pages {sorted(unknown)} (the pages are {', '.join(PAGES)})")
        if self.routing is not None and self.routing not in routings:
            out.append(f"{self.name}: routing {self.routing!r} (no such entry in ROUTINGS)")
        if "tour" in self.pages and self.tour is None:
            out.append(f"{self.name}: tour (its pages name the tour)")
        if self.routing is not None and self.votes is None:
            out.append(f"{self.name}: votes (its routing's memory for capsviz.estimate)")
        if ("routing" in self.pages or self.site is not None) and self.layout is None:
            out.append(f"{self.name}: layout (where its primary capsules sit, for the routing page and the static site)")
        if "routing" in self.pages and self.routing in routings and routings[self.routing].view not in ROUTING_VIEWS:
            out.append(f"{self.name}: routing page (its routing {self.routing!r} has no view there: Routing.view)")
        if self.why and self.why not in WHY_KINDS:
            out.append(f"{self.name}: why {self.why!r} (the Why capsules chapter's kinds are {', '.join(WHY_KINDS)}; empty: none)")
        vector = self.routing in routings and routings[self.routing].vector
        if self.why in WHY_KINDS and vector != (self.why == "vector"):
            out.append(f"{self.name}: why {self.why!r} (its routing {self.routing!r} is not one of {self.why} capsules)")
        if self.paper and not self.paper_presets:
            out.append(f"{self.name}: paper_presets (the paper's model its published errors are for)")
        return out
