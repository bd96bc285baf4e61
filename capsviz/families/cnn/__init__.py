"""The baseline CNNs the capsule papers compare with: their registry entry."""

from capsviz.entries import Family
from capsviz.i18n import N_

FAMILY = Family(
    "cnn",
    config="capsviz.families.cnn.config:CNNConfig",
    model="capsviz.families.cnn.model:BaselineCNN",
    presets="capsviz.families.cnn.config:PRESETS",
    words=N_("a baseline CNN"),
    short=N_("baseline CNN"),
    title=N_("plain CNN (no capsules)"),
    about=N_("A plain convolutional network, the baseline the capsule papers compare with: no capsules, no routing."),
    score=N_("softmax probability"),
    routing=None,
    unrouted=N_("none (CNN)"),
    paper={("mnist", None, None): 0.39, ("multimnist", None, None): 8.1},
    # each dataset's paper baseline has its own architecture (CNNConfig.kind)
    paper_presets={"mnist": "cnn-mnist", "multimnist": "cnn-multimnist", "smallnorb": "cnn-smallnorb"},
    baseline=True,
)
