"""The "Why capsules" chapter's graphs for the static site (capsviz.site.export): the changes of a
digit are the chapter's own (capsviz.analysis.why.moved and scrambled), the baseline CNN's graph gives
its features and scores; run with onnx's reference evaluator, so no browser is needed."""

import numpy as np
import onnx
import pytest
import torch
from onnx.reference import ReferenceEvaluator

from capsviz.analysis import why
from capsviz.checkpoint import load_checkpoint
from capsviz.paths import shipped_checkpoints
from capsviz.site import export


def digit() -> torch.Tensor:
    x = torch.zeros(1, 1, 28, 28)
    x[0, 0, 6:22, 12:15] = 1.0  # a bar, a "1"
    x[0, 0, 6:9, 9:15] = 0.6
    return x


def test_the_changes_graph_is_the_chapters_shifts_turns_and_moved_parts():
    x = digit()
    got = ReferenceEvaluator(onnx.load_from_string(export.changes_graph(1, 28))).run(None, {"image": x.numpy()})[0]
    want = torch.cat(
        [
            *(why.moved(x, "shift", a) for a in why.SHIFTS),
            *(why.moved(x, "rotate", a) for a in why.ANGLES),
            *(why.scrambled(x, s) for s in why.SCHEMES),
        ]
    ).numpy()
    assert got.shape == (len(why.SHIFTS) + len(why.ANGLES) + len(why.SCHEMES), 1, 28, 28)
    assert np.abs(got - want).max() < 1e-5


def test_the_baseline_graph_gives_the_cnns_pooled_features_and_scores():
    cnn, _ = load_checkpoint(shipped_checkpoints() / "cnn-small-mnist.safetensors")
    x = digit()
    features, scores = ReferenceEvaluator(onnx.load_from_string(export.baseline_graph(cnn))).run(None, {"image": x.numpy()})
    with torch.no_grad():
        f = cnn.features(x)
        p = cnn.head(f).softmax(-1)
    assert np.abs(features - f.flatten(1).numpy()).max() < 1e-4 and np.abs(scores - p.numpy()).max() < 1e-5
    assert scores.sum() == pytest.approx(1, abs=1e-5)
