"""What the EM, explorer and MultiMNIST pages say in words, each from the numbers their figures
draw (numpy out).

One concern per module: `em` (the EM page: zoom limits that are the ones stated, the order of the
histogram panels, how the assignments split), `pairs` (the MultiMNIST page: a pair's captions and
how far the couplings of its two winning capsules move from uniform beside a single digit),
`explorer` (how much each explorer offset changes the drawing) and `shared` (a grid position in
words, a scale's rounded top). The pages and tests read them from here.
"""

from __future__ import annotations

from capsviz.analysis.explain.em import (
    FULL,
    MIN_SHARE_IN_ZOOM,
    NEAREST,
    PAPER_ZOOM,
    EMShares,
    Zoom,
    conv_assignment_words,
    distance_words,
    em_share_words,
    em_shares,
    panel_order,
    verdict_words,
    zoom_limit,
)
from capsviz.analysis.explain.explorer import (
    EXPLORER_INTRO,
    TOP_DIMENSIONS,
    change_share,
    effect_words,
    offset_words,
)
from capsviz.analysis.explain.pairs import (
    PairRouting,
    capsule_role,
    pair_routing,
    pair_routing_title,
    pair_routing_words,
    pair_words,
    peak_words,
    reconstruction_words,
)
from capsviz.analysis.explain.shared import (
    position_words,
    round_up,
)

__all__ = [
    "round_up",
    "position_words",
    "PAPER_ZOOM",
    "MIN_SHARE_IN_ZOOM",
    "NEAREST",
    "FULL",
    "Zoom",
    "zoom_limit",
    "panel_order",
    "EMShares",
    "em_shares",
    "distance_words",
    "verdict_words",
    "em_share_words",
    "conv_assignment_words",
    "pair_words",
    "capsule_role",
    "reconstruction_words",
    "PairRouting",
    "pair_routing",
    "peak_words",
    "pair_routing_title",
    "pair_routing_words",
    "EXPLORER_INTRO",
    "TOP_DIMENSIONS",
    "change_share",
    "effect_words",
    "offset_words",
]
