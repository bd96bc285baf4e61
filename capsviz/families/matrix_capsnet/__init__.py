"""Hinton et al.'s matrix capsules with EM routing: its registry entry."""

from capsviz.entries import Family
from capsviz.i18n import N_

FAMILY = Family(
    "matrix",
    config="capsviz.families.matrix_capsnet.config:MatrixCapsConfig",
    model="capsviz.families.matrix_capsnet.model:MatrixCapsNet",
    presets="capsviz.families.matrix_capsnet.config:PRESETS",
    words=N_("a matrix-capsule model"),
    short=N_("matrix capsules"),
    title=N_("matrix capsules (4x4 poses)"),
    about=N_("Hinton et al.'s matrix capsules: each capsule holds a 4x4 pose and an activation, routed by EM."),
    score=N_("class activation"),
    routing="em",
    pages=frozenset({"em", "tour", "robustness"}),
    tour="capsviz.families.matrix_capsnet.tour:TOUR",
    votes="capsviz.families.matrix_capsnet.model:training_votes",
    paper={("mnist", 3, None): 0.44},
    paper_presets={"*": "matrix"},
    why="matrix",  # the Why capsules chapter: its votes under a change of viewpoint
    attacks=True,  # Hinton et al. section 6: FGSM and BIM against a CNN
)
