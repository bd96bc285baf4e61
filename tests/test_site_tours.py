"""The tour's words the static site shows (capsviz.site.tours): the app's own walk over each image,
in every language, with the numbers of the figures the site draws from them; needs no dataset
(made-up images: the walk words any image)."""

import re

import numpy as np
import pytest

from capsviz.analysis.tour import tour_of, walk
from capsviz.checkpoint import load_checkpoint
from capsviz.glossary import class_words
from capsviz.i18n import LANGUAGES, speaking
from capsviz.paths import shipped_checkpoints
from capsviz.site import _tour_steps, tours


def images(n: int, size: int = 28) -> np.ndarray:
    """n made-up grey images (n, size, size) uint8: a bright bar each in another place."""
    out = np.zeros((n, size, size), np.uint8)
    for k in range(n):
        out[k, 6 + 2 * k : 22 + 2 * k, 12 + k : 15 + k] = 255
    return out


@pytest.fixture(scope="module")
def capsnet():
    path = shipped_checkpoints() / "capsnet-small-mnist.safetensors"
    model, meta = load_checkpoint(path)
    got = tours.tour_words(model, meta, path, images(2), [1, 7], n=2)
    return path, model, meta, got


def test_each_language_has_the_apps_words_for_each_image(capsnet):
    path, model, meta, got = capsnet
    assert set(got) == set(LANGUAGES) and all(len(v) == 2 for v in got.values())
    names = [str(c) for c in meta.class_names]
    image = images(2)[1].astype(np.float32) / 255
    for lang in LANGUAGES:
        with speaking(lang):
            trace = tour_of(model.config).follow(model, image)
            want = walk(trace, names, class_words(meta), path.stem, "7", "x", tours.lab_rows(path, meta), model.config)
            asked = [str(w.question.text) if w.question else None for w in want]  # said in this language
        steps = got[lang][1]
        assert [s["key"] for s in steps] == [w.key for w in want]
        for s, w, text in zip(steps, want, asked, strict=True):
            assert s["text"] == w.text and s["measured"] == w.measured and s["warn"] == w.warn, (lang, s["key"])
            assert s["terms"] == list(w.terms)
            assert (s["question"] is None) == (w.question is None), (lang, s["key"])
            if w.question is not None:  # the step's question, as the app asks it
                assert (s["question"]["qid"], s["question"]["answer"], s["question"]["text"]) == (
                    w.question.qid,
                    w.question.answer,
                    text,
                )
    # the page finds a step's words by its place among the manifest's steps: the same steps, in order
    assert [s["key"] for s in got["en"][0]] == [s.key for s in _tour_steps(model, meta)]
    assert any(s["question"] for s in got["en"][0])
    assert got["ja"][1][0]["text"] != got["en"][1][0]["text"]  # the words are each language's


def test_each_figure_the_site_draws_carries_the_numbers_its_sentences_quote(capsnet):
    _, model, meta, got = capsnet
    steps = {s["key"]: s for s in got["en"][0]}
    assert steps["primary"]["figure"] == "arrows" and len(steps["primary"]["data"]["lengths"]) == model.config.primary_grid
    assert steps["predictions"]["figure"] == "grid"
    assert steps["input"]["figure"] == "" and steps["input"]["data"] is None  # the site draws the input itself
    it = steps["iteration2"]
    assert it["figure"] == "routing"
    d = it["data"]
    # the sentence's |s_W| and |v_W| are the numbers under the winner's plane
    assert f"= {d['s_len'][0]} squashes to |v_" in " ".join(it["text"]) and f"= {d['v_len'][0]}" in " ".join(it["text"])
    assert np.asarray(d["points"]).shape == (2, 6, 2) and np.asarray(d["weights"]).shape == (2, 6)
    # the table's couplings to the winner are the plane's weights, as the table writes them
    column = it["table"]["columns"].index(next(c for c in it["table"]["columns"] if c.startswith("c to")))
    assert [r[column] for r in it["table"]["rows"]] == [f"{w:.3f}" for w in d["weights"][0]]
    lab = steps["lab"]
    if lab["figure"]:  # the lab's stored rows ship with the model
        quoted = {float(x) for x in re.findall(r"(?:misclassifies|against) ([0-9]+\.[0-9]+)%", " ".join(lab["text"]))}
        assert quoted and quoted <= {round(e, 2) for e in lab["data"]["error"]}


def test_the_matrix_tour_carries_its_em_planes_and_pose():
    path = shipped_checkpoints() / "matrix-small-mnist.safetensors"
    model, meta = load_checkpoint(path)
    got = tours.tour_words(model, meta, path, images(1), [1], n=1)["en"][0]
    kinds = {s["key"]: s["figure"] for s in got}
    assert kinds == {"input": "", "primary": "em_primary", "votes": "votes", "iteration1": "em", "iteration2": "em", "activations": "bars"}
    primary = next(s for s in got if s["key"] == "primary")
    pose = np.asarray(primary["data"]["pose"])
    assert f"from {pose.min():.3f} to {pose.max():.3f}" in primary["measured"]
    em = next(s for s in got if s["key"] == "iteration2")["data"]
    assert em["fit"] and np.asarray(em["mu"]).shape == (2, 2) and np.asarray(em["sigma"]).shape == (2, 2)
    assert not next(s for s in got if s["key"] == "votes")["data"]["fit"]


def test_pairs_are_not_explained():
    _, meta = load_checkpoint(shipped_checkpoints() / "capsnet-small-multimnist.safetensors")
    assert not tours.explained(meta)
    _, meta = load_checkpoint(shipped_checkpoints() / "capsnet-small-mnist.safetensors")
    assert tours.explained(meta)
