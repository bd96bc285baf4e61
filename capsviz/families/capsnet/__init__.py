"""Sabour et al.'s dynamic-routing CapsNet: its registry entry."""

from capsviz.entries import Family
from capsviz.i18n import N_

FAMILY = Family(
    "capsnet",
    config="capsviz.families.capsnet.config:CapsNetConfig",
    model="capsviz.families.capsnet.model:CapsNet",
    presets="capsviz.families.capsnet.config:PRESETS",
    words=N_("a CapsNet"),
    short=N_("CapsNet"),
    title=N_("CapsNet (vector capsules)"),
    about=N_("Sabour et al.'s capsule network: vector capsules whose votes are routed by agreement."),
    score=N_("capsule length"),
    routing="dynamic",
    pages=frozenset({"routing", "lab", "tour", "explorer", "robustness"}),
    tour="capsviz.families.capsnet.tour:TOUR",
    votes="capsviz.families.capsnet.model:training_votes",
    # Published test errors (%) of Sabour et al.: (dataset, routing iterations, reconstruction)
    paper={
        ("mnist", 3, True): 0.25,
        ("mnist", 1, True): 0.29,
        ("mnist", 3, False): 0.35,
        ("mnist", 1, False): 0.34,
        ("multimnist", 3, True): 5.2,
        ("multimnist", 1, True): 7.5,
    },
    paper_presets={"*": "capsnet", "multimnist": "capsnet-multimnist"},
    site="capsviz.site.export:model_graphs",
    layout="capsviz.families.capsnet.model:primary_layout",
    why="vector",  # the Why capsules chapter: beside the baseline CNN
)
