"""The model families and the routings, one entry each: everything else looks them up here.

Adding a routing is one `Routing` entry in `ROUTINGS` plus its function; adding a family is one
folder, capsviz/families/NAME/ (its entry in `__init__.py`, its config, its model and, if the
tour follows it, its tour), plus its folder's name in `FAMILY_FOLDERS`. `route` (capsviz.routing),
the routing lab's list and words, the config loader and `build_model`, the checkpoint schema, the
memory estimate, the zoo's cards, the reproduction tables, the tour and the pages' "which models
fit" checks read these tables (capsviz.entries says what an entry holds).

The entries name their code as "module:attribute", imported when first used, so this module
imports nothing of capsviz above capsviz.entries (config and routing can both read it).
"""

from __future__ import annotations

import importlib

from capsviz.entries import Family, Routing, resolve
from capsviz.i18n import N_, t

__all__ = ["FAMILIES", "FAMILY_FOLDERS", "ROUTINGS", "Family", "Routing", "resolve"]

# One label for a CapsNet trained with one iteration of dynamic routing, on every page, and why it is uniform couplings
ONE_ITERATION = N_("dynamic routing, 1 iteration")
ONE_ITERATION_WHY = N_("with 1 iteration the couplings stay uniform: b starts at 0 and is never updated")
# ... and the two together, as a zoo card names the routing
ONE_ITERATION_CARD = N_("dynamic routing, 1 iteration (with 1 iteration the couplings stay uniform: b starts at 0 and is never updated)")

ROUTINGS: dict[str, Routing] = {
    r.name: r
    for r in (
        Routing(
            "dynamic",
            "capsviz.routing:route_dynamic",
            words=N_("dynamic routing"),
            short=N_("dynamic"),
            about=N_("the couplings are set by iterations of agreement"),
            iterative=True,
            uniform="at the first iteration only (the logits b start at 0); later iterations move the couplings by agreement",
            from_votes=True,
            card=N_("dynamic"),
            one_iteration=ONE_ITERATION_CARD,
            copies=2,  # u_hat and its gradient
            view="iterations",
        ),
        Routing(
            "uniform",
            "capsviz.routing:route_uniform",
            words=N_("uniform couplings (no routing)"),
            short=N_("uniform"),
            about=N_("every vote is split evenly over the classes, whatever the image"),
            iterative=False,
            uniform="always: every coupling is 1/J, which is dynamic routing with one iteration",
            from_votes=False,
            card=N_("uniform couplings: no routing (a baseline)"),
        ),
        Routing(
            "random",
            "capsviz.routing:route_random",
            words=N_("fixed random couplings"),
            short=N_("random"),
            about=N_("each primary capsule's vote is split over the classes by fixed random shares, the same for every image"),
            iterative=False,
            uniform="never: the shares are drawn once from a fixed seed and never change",
            from_votes=False,
            card=N_("random couplings: no routing (a baseline)"),
        ),
        Routing(
            "self-attention",
            "capsviz.routing:route_self_attention",
            words=N_("self-attention routing (one pass)"),
            short=N_("self-attention"),
            about=N_("the couplings are set by one pass of self-attention"),
            iterative=False,
            uniform="only where every vote agrees equally with the others, which a trained model's votes rarely do",
            from_votes=True,
            card=N_("self-attention, one pass"),
            copies=2,
            view="attention",
        ),
        Routing(
            "em",
            "capsviz.routing:em_routing",
            words=N_("EM routing"),
            about=N_(
                "each class capsule fits a Gaussian to the votes it explains, and each vote goes to the capsules that explain it best"
            ),
            iterative=True,
            uniform="at the first M-step only (every assignment R is 1/J); later E-steps move them",
            from_votes=True,
            vector=False,
            card=N_("EM"),
            copies=4,  # the votes, their gradient, and per iteration the assignments and squared distances of that size
        ),
    )
}

# The families, one folder each under capsviz/families/, in the order the pages list them; each
# folder's __init__.py holds its `FAMILY` entry (which imports nothing of capsviz but capsviz.entries)
FAMILY_FOLDERS = ("capsnet", "efficient_capsnet", "matrix_capsnet", "cnn")
FAMILIES: dict[str, Family] = {
    f.name: f for f in (importlib.import_module(f"capsviz.families.{folder}").FAMILY for folder in FAMILY_FOLDERS)
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
    names = [t(FAMILIES[f].short) for f in families_on(page)]
    if len(names) == 1:
        return names[0]
    return t("{names} or {last}", names=", ".join(names[:-1]), last=names[-1])


def family_words(name: str) -> str:
    """'a CapsNet', 'an Efficient-CapsNet', ...: a model family in a sentence."""
    f = FAMILIES.get(name)
    return t(f.words) if f else t("a {name} model", name=name)


def routing_words(name: str) -> str:
    """A routing's plain name, or the name itself where none is registered."""
    r = ROUTINGS.get(name)
    return t(r.words) if r else name
