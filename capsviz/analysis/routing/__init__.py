"""What the routing pages draw and say, computed from the core's recorded traces (numpy out).

One concern per module: `traces` (one image routed, every iteration recorded: `dynamic_trace`,
`attention_trace`, `em_trace`), `sweeps` (routing over a batch of images or over iteration counts),
`canvas` (a MultiMNIST model shown one digit, centred on its canvas), `maps` (the sentences beside
the coupling maps), `charts` (the sentences beside the charts over iterations) and `attention`
(the sentences of the one-pass view). The pages and tests read them as
`capsviz.analysis.routing.NAME`, from here.
"""

from __future__ import annotations

from capsviz.analysis.routing.attention import (
    attention_words,
    sweep_words,
)
from capsviz.analysis.routing.canvas import (
    canvas_words,
    centred,
    centred_batch,
    on_canvas,
)
from capsviz.analysis.routing.charts import (
    ENTROPY_RANGE,
    convergence_words,
    dynamic_sweep_words,
    entropy_figure,
    entropy_words,
    length_words,
    summary_words,
    trained_with_words,
)
from capsviz.analysis.routing.maps import (
    capsule_axes,
    capsule_labels,
    capsule_name,
    detail_words,
    flat,
    map_words,
    once_words,
    span_words,
    times,
    unplaced_words,
)
from capsviz.analysis.routing.sweeps import (
    coupling_summary,
    iteration_sweep,
    mean_b_change,
    sweep_of_trace,
)
from capsviz.analysis.routing.traces import (
    AttentionTrace,
    DynamicTrace,
    EMTrace,
    attention_trace,
    dynamic_trace,
    em_trace,
    entropy_of,
    vote_histograms,
)

__all__ = [
    "DynamicTrace",
    "entropy_of",
    "dynamic_trace",
    "AttentionTrace",
    "attention_trace",
    "EMTrace",
    "em_trace",
    "vote_histograms",
    "mean_b_change",
    "coupling_summary",
    "iteration_sweep",
    "sweep_of_trace",
    "on_canvas",
    "centred",
    "centred_batch",
    "canvas_words",
    "flat",
    "once_words",
    "times",
    "span_words",
    "unplaced_words",
    "map_words",
    "detail_words",
    "capsule_axes",
    "capsule_name",
    "capsule_labels",
    "trained_with_words",
    "length_words",
    "ENTROPY_RANGE",
    "entropy_figure",
    "entropy_words",
    "convergence_words",
    "summary_words",
    "dynamic_sweep_words",
    "attention_words",
    "sweep_words",
]
