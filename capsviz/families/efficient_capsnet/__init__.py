"""Mazzia et al.'s Efficient-CapsNet: its registry entry."""

from capsviz.entries import Family
from capsviz.i18n import N_

FAMILY = Family(
    "efficient",
    config="capsviz.families.efficient_capsnet.config:EfficientCapsConfig",
    model="capsviz.families.efficient_capsnet.model:EfficientCapsNet",
    presets="capsviz.families.efficient_capsnet.config:PRESETS",
    words=N_("an Efficient-CapsNet"),
    short=N_("Efficient-CapsNet"),
    title=N_("Efficient-CapsNet (vector capsules)"),
    about=N_("Mazzia et al.'s small capsule network: vector capsules routed by one pass of self-attention."),
    score=N_("capsule length"),
    routing="self-attention",
    pages=frozenset({"routing", "lab", "tour", "explorer", "robustness"}),
    tour="capsviz.families.efficient_capsnet.tour:TOUR",
    votes="capsviz.families.efficient_capsnet.model:training_votes",
    paper={("mnist", None, True): 0.26},  # Mazzia et al. 2021, 150 epochs with augmentation
    paper_presets={"*": "efficient-capsnet"},
    site="capsviz.site.export:model_graphs",
    layout="capsviz.families.efficient_capsnet.model:primary_layout",
    why="vector",  # the Why capsules chapter: beside the baseline CNN
    # its steps of the same name explain other things: its primary capsules are not on a grid of
    # positions (the "primary" entry describes the paper CapsNet's 32 types at 6x6 places)
    tour_terms={
        "input": ["capsule", "efficient"],
        "convs": ["relu", "batchnorm"],
        "primary": ["efficient_squash", "length", "pose"],
    },
)
