"""The model families and the routings, one entry each: everything else looks them up here.

Adding a routing is one `Routing` entry in `ROUTINGS` plus its function in its own module; adding a
family is one `Family` entry in `FAMILIES` plus its config and model classes. `route`
(capsviz.routing), the routing lab's list and words (capsviz.analysis.lab), the config loader and
`build_model`, the checkpoint schema's family check, the tour and the pages' "which models fit"
checks read these tables.

Functions and classes are named "module:attribute" and imported when first used, so this module
imports nothing of capsviz (config and routing can both read it); a test may give a callable or a
class directly.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field


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
    about: one sentence-part for students: how it sets the couplings ("every vote is split evenly ...").
    iterative: whether it has routing iterations (the pages' iteration slider, "n iterations").
    uniform: what "uniform" means for it: where, if ever, its couplings are the even split 1/J.
    from_votes: whether it computes the couplings from the votes (so "how far from uniform" says
        something about the image); uniform and fixed random couplings do not.
    """

    name: str
    run: Callable | str
    words: str
    about: str
    iterative: bool
    uniform: str
    from_votes: bool
    vector: bool = True

    @property
    def function(self) -> Callable:
        return resolve(self.run)


@dataclass(frozen=True)
class Family:
    """A model family.

    fields: "module:NAME" (or the object) of its config's fields and bounds, as checkpoint files
        are checked (a capsviz.schema.Obj).
    config, model: "module:Class" (or the classes) of its config dataclass and its nn.Module
        (built as model(config=config)).
    words: the family in a sentence ("a CapsNet"); short: as a name in a list ("CapsNet");
    title: in a label ("CapsNet (vector capsules)"); about: one sentence for students.
    score: what its class scores are, as a figure's axis says it ("capsule length").
    routing: its routing's name in ROUTINGS, None for a model without capsules.
    pages: the pages that can show it: "routing" (vector-capsule routing), "em" (EM routing),
        "lab" (its routing can be swapped), "tour" (a tour follows it), "explorer" (with a decoder),
        "robustness".
    """

    name: str
    fields: object
    config: type | str
    model: type | str
    words: str
    short: str
    title: str
    about: str
    score: str
    routing: str | None
    pages: frozenset[str] = field(default_factory=frozenset)

    @property
    def config_class(self) -> type:
        return resolve(self.config)

    @property
    def model_class(self) -> type:
        return resolve(self.model)

    def build(self, config):
        return self.model_class(config=config)


ROUTINGS: dict[str, Routing] = {
    r.name: r
    for r in (
        Routing(
            "dynamic",
            "capsviz.routing:route_dynamic",
            words="dynamic routing",
            about="the couplings are set by iterations of agreement",
            iterative=True,
            uniform="at the first iteration only (the logits b start at 0); later iterations move the couplings by agreement",
            from_votes=True,
        ),
        Routing(
            "uniform",
            "capsviz.routing:route_uniform",
            words="uniform couplings (no routing)",
            about="every vote is split evenly over the classes, whatever the image",
            iterative=False,
            uniform="always: every coupling is 1/J, which is dynamic routing with one iteration",
            from_votes=False,
        ),
        Routing(
            "random",
            "capsviz.routing:route_random",
            words="fixed random couplings",
            about="each primary capsule's vote is split over the classes by fixed random shares, the same for every image",
            iterative=False,
            uniform="never: the shares are drawn once from a fixed seed and never change",
            from_votes=False,
        ),
        Routing(
            "self-attention",
            "capsviz.routing:route_self_attention",
            words="self-attention routing (one pass)",
            about="the couplings are set by one pass of self-attention",
            iterative=False,
            uniform="only where every vote agrees equally with the others, which a trained model's votes rarely do",
            from_votes=True,
        ),
        Routing(
            "em",
            "capsviz.routing:em_routing",
            words="EM routing",
            about="each class capsule fits a Gaussian to the votes it explains, and each vote goes to the capsules that explain it best",
            iterative=True,
            uniform="at the first M-step only (every assignment R is 1/J); later E-steps move them",
            from_votes=True,
            vector=False,
        ),
    )
}

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "capsnet",
            "capsviz.schema:CAPSNET_FIELDS",
            "capsviz.config:CapsNetConfig",
            "capsviz.models.capsnet:CapsNet",
            words="a CapsNet",
            short="CapsNet",
            title="CapsNet (vector capsules)",
            about="Sabour et al.'s capsule network: vector capsules whose votes are routed by agreement.",
            score="capsule length",
            routing="dynamic",
            pages=frozenset({"routing", "lab", "tour", "explorer", "robustness"}),
        ),
        Family(
            "efficient",
            "capsviz.schema:EFFICIENT_FIELDS",
            "capsviz.config:EfficientCapsConfig",
            "capsviz.models.efficient_capsnet:EfficientCapsNet",
            words="an Efficient-CapsNet",
            short="Efficient-CapsNet",
            title="Efficient-CapsNet (vector capsules)",
            about="Mazzia et al.'s small capsule network: vector capsules routed by one pass of self-attention.",
            score="capsule length",
            routing="self-attention",
            pages=frozenset({"routing", "lab", "tour", "explorer", "robustness"}),
        ),
        Family(
            "matrix",
            "capsviz.schema:MATRIX_FIELDS",
            "capsviz.config:MatrixCapsConfig",
            "capsviz.models.matrix_capsnet:MatrixCapsNet",
            words="a matrix-capsule model",
            short="matrix capsules",
            title="matrix capsules (4x4 poses)",
            about="Hinton et al.'s matrix capsules: each capsule holds a 4x4 pose and an activation, routed by EM.",
            score="class activation",
            routing="em",
            pages=frozenset({"em", "tour", "robustness"}),
        ),
        Family(
            "cnn",
            "capsviz.schema:CNN_FIELDS",
            "capsviz.config:CNNConfig",
            "capsviz.models.baselines:BaselineCNN",
            words="a baseline CNN",
            short="baseline CNN",
            title="plain CNN (no capsules)",
            about="A plain convolutional network, the baseline the capsule papers compare with: no capsules, no routing.",
            score="softmax probability",
            routing=None,
        ),
    )
}


def routing(name: str) -> Routing:
    """The routing called `name`; ValueError naming the choices otherwise."""
    if name not in ROUTINGS:
        raise ValueError(f"unknown routing {name!r}; choose from {', '.join(ROUTINGS)}")
    return ROUTINGS[name]


def vector_routings() -> tuple[str, ...]:
    """The routings of vector capsules, interchangeable in `route` (a CapsNet's `couplings`)."""
    return tuple(n for n, r in ROUTINGS.items() if r.vector)


def family(name: str) -> Family:
    """The family called `name`; KeyError otherwise."""
    return FAMILIES[name]


def shows(config, page: str) -> bool:
    """Whether a model of this config is one `page` can show (its family entry's `pages`)."""
    f = FAMILIES.get(getattr(config, "family", None))
    return f is not None and page in f.pages


def families_on(page: str) -> tuple[str, ...]:
    """The families `page` can show."""
    return tuple(n for n, f in FAMILIES.items() if page in f.pages)


def either(page: str) -> str:
    """The families `page` can show, as a list of names in a sentence ("CapsNet or Efficient-CapsNet")."""
    names = [FAMILIES[f].short for f in families_on(page)]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def family_words(name: str) -> str:
    """'a CapsNet', 'an Efficient-CapsNet', ...: a model family in a sentence."""
    f = FAMILIES.get(name)
    return f.words if f else f"a {name} model"


def routing_words(name: str) -> str:
    """A routing's plain name, or the name itself where none is registered."""
    r = ROUTINGS.get(name)
    return r.words if r else name
