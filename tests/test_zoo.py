"""The zoo's cards: sizes with and without the decoder from one count, the paper's figure from the
one table of published errors (the routing lab quotes the same), and chance beside every error."""

import dataclasses

import pytest
import torch

from capsviz.analysis import lab, rule_words, rules
from capsviz.analysis.lab import EFFICIENT_MNIST
from capsviz.analysis.reproduction import PAPER, paper_error
from capsviz.analysis.zoo import (
    PAIR_ERROR,
    Size,
    card,
    epochs_note,
    model_size,
    paper_words,
    parameter_counts,
)
from capsviz.checkpoint import list_checkpoints, load_checkpoint
from capsviz.config import preset
from capsviz.models import build_model
from capsviz.paths import shipped_checkpoints
from capsviz.registry import ONE_ITERATION, ONE_ITERATION_WHY
from capsviz.schema import Metrics

SHIPPED = [(p, m) for p, m in list_checkpoints(shipped_checkpoints()) if not isinstance(m, str)]


def test_size_words_name_both_counts_or_say_there_is_no_decoder():
    assert Size(161_824, 1_573_168).words() == "161,824 without the decoder, 1,573,168 with"
    assert Size(68_444, 68_444).words() == "68,444 (no decoder)"


def test_the_count_without_the_decoder_leaves_out_exactly_the_decoder():
    torch.manual_seed(0)
    model = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4))
    size = parameter_counts(model)
    decoder = sum(p.numel() for p in model.decoder.parameters())
    assert size.with_decoder == sum(p.numel() for p in model.parameters()) and size.without_decoder == size.with_decoder - decoder > 0
    assert model_size(model.config) == size  # built on the meta device: the same numbers, no weights


@pytest.mark.parametrize(("path", "meta"), SHIPPED, ids=[p.stem for p, _ in SHIPPED])
def test_every_shipped_card_quotes_the_counts_of_its_model_and_its_own_error(path, meta):
    model, _ = load_checkpoint(path)
    said = card(meta)
    assert said.size == parameter_counts(model)  # the tour's count too (capsviz.analysis.steps)
    assert said.size.with_decoder == meta.parameters  # what the checkpoint recorded when it was saved
    assert f"{said.size.without_decoder:,}" in said.size.words() and f"{said.size.with_decoder:,}" in said.size.words()
    assert said.error == f"{meta.metrics.test_error:.2f}%"
    labels = 2 if meta.dataset == "multimnist" else 1
    assert said.guessing == rule_words.guessing_words(meta.metrics.test_error, meta.metrics.n_test, meta.config.num_classes, labels)
    guess = rules.chance_error(10, labels)
    assert f"{meta.metrics.test_error:.2f}% against {guess:.2f}% for guessing" in said.guessing
    unit = "test pairs" if labels == 2 else "test images"
    assert (
        f"chance is ±{rules.spread(meta.metrics.test_error, meta.metrics.n_test):.2f} points here: how far "
        f"{meta.metrics.test_error:.2f}% could move on {meta.metrics.n_test:,} other {unit} alone" in said.guessing
    )
    assert "beats chance" not in said.guessing
    paper = paper_error(meta)
    if paper is not None:
        assert said.paper.startswith(f"paper: {paper}%")


def test_efficient_capsnet_quotes_the_papers_figure_the_lab_quotes():
    (meta,) = [m for p, m in SHIPPED if m.config.family == "efficient"]
    said = card(meta)
    assert said.size.words() == "161,824 without the decoder, 1,573,168 with"  # the paper's 161k is without it
    assert said.paper == f"paper: {PAPER[EFFICIENT_MNIST]}%"
    assert any(f"{PAPER[EFFICIENT_MNIST]}% MNIST test error" in line for line in lab.published())


def test_paper_words_say_which_figure_applies():
    capsnet = next(m for p, m in SHIPPED if p.stem == "capsnet-mnist")
    small = next(m for p, m in SHIPPED if p.stem == "capsnet-small-mnist")
    fashion = next(m for p, m in SHIPPED if p.stem == "capsnet-fashion-mnist")
    assert paper_words(capsnet) == f"paper: {PAPER['capsnet', 'mnist', 3, True]}%"
    assert paper_words(small) == f"paper: {PAPER['capsnet', 'mnist', 3, True]}% for the full-size model; this one is smaller"
    assert paper_words(fashion) == "no paper figure for this setting"
    for name in ("capsnet-small-uniform-mnist", "capsnet-small-random-mnist"):  # baselines that never route: no iterations of theirs
        assert paper_words(_shipped(name)) == (
            f"paper: {PAPER['capsnet', 'mnist', 3, True]}% for the full-size model with 3 routing iterations; this one is smaller and is not routed"
        )
    matrix = paper_words(_shipped("matrix-small-mnist"))
    assert matrix.endswith(f"this one is smaller, with {_shipped('matrix-small-mnist').config.routing_iterations} iterations")


def test_an_unmeasured_model_says_so_and_claims_nothing_against_guessing():
    meta = dataclasses.replace(SHIPPED[0][1], metrics=Metrics())
    said = card(meta)
    assert said.error == "not measured" and said.guessing is None


def test_a_card_near_guessing_says_it_does_no_better():
    meta = next(m for p, m in SHIPPED if p.stem == "capsnet-mnist")
    near = dataclasses.replace(meta, metrics=Metrics(89.0, 11.0, 300, "fixture"))
    far = dataclasses.replace(meta, metrics=Metrics(20.0, 80.0, 300, "fixture"))
    assert "89.00% against 90.00% for guessing, no better than guessing: the gap of 1.00 points is within chance" in card(near).guessing
    assert "20.00% against 90.00% for guessing, 70.00 points better than guessing, a gap beyond chance" in card(far).guessing


def _shipped(name):
    return next(m for p, m in SHIPPED if p.stem == name)


@pytest.mark.parametrize(("path", "meta"), SHIPPED, ids=[p.stem for p, _ in SHIPPED])
def test_a_two_digit_models_error_is_named_the_pair_error_and_defined_beside_it(path, meta):
    said = card(meta)
    if meta.dataset == "multimnist":  # the metric stored: both digits among the two longest capsules
        assert "both digits" in meta.metrics.how
        assert said.error_name == "Pair error" and said.error_means == PAIR_ERROR
        assert said.error == f"{100 - meta.metrics.test_accuracy:.2f}%"  # 100% - pair accuracy, as the definition says
    else:
        assert said.error_name == "Test error" and "share of test images" in said.error_means


def test_the_matrix_models_card_quotes_the_papers_em_figure_for_the_full_size_model():
    meta = _shipped("matrix-small-mnist")
    assert paper_error(meta) is None  # the paper's figure is for 3 iterations, this model routes with 2
    assert paper_words(meta) == (
        f"paper: {PAPER['matrix', 'mnist', 3, None]}% for the full-size model with 3 routing iterations; this one is smaller, with 2 iterations"
    )


def test_one_iteration_of_dynamic_routing_has_one_label_that_says_the_couplings_stay_uniform():
    meta = _shipped("capsnet-one-iteration-mnist")
    assert card(meta).routing == f"{ONE_ITERATION} ({ONE_ITERATION_WHY})"
    assert ONE_ITERATION == "dynamic routing, 1 iteration" and "stay uniform" in ONE_ITERATION_WHY
    assert lab.trained_label(meta.config).startswith(ONE_ITERATION) and lab.trained_with(meta.config) == "uniform"
    assert card(_shipped("capsnet-mnist")).routing == "dynamic, 3 iterations"


def test_fractional_epochs_say_the_run_stopped_before_its_plan_or_nothing_when_it_did_not():
    meta = _shipped("capsnet-mnist")
    planned = meta.raw["run"]["epochs"]
    assert epochs_note(meta).endswith(f"stopped after {meta.raw['epochs']:.1f} of the {planned:g} epochs it was planned for.")
    whole = dataclasses.replace(meta, raw={"epochs": 12.0, "run": {"epochs": 12}})
    assert epochs_note(whole) is None
    early = dataclasses.replace(meta, raw={"epochs": 12.0, "run": {"epochs": 20}})  # whole epochs, but fewer than planned
    assert "12.0 of the 20 epochs" in epochs_note(early)
    chained = dataclasses.replace(meta, raw={"epochs": 2.5, "run": {"epochs": 10}, "started_from": {"epochs": 4.0, "run": {"epochs": 4}}})
    assert "2 runs" in epochs_note(chained) and "(4.0 of 4 planned, 2.5 of 10 planned)" in epochs_note(chained)


def test_the_zoo_page_names_each_cards_error_and_defines_it_beside_the_number(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    at = AppTest.from_file(str(shipped_checkpoints().parent / "app.py"), default_timeout=120)
    at.switch_page("pages/zoo.py").run()
    assert not at.exception
    labels = [m.label for m in at.metric if m.label != "Length after squash"]  # the squash widget's
    pairs = sum(m.dataset == "multimnist" for _, m in SHIPPED if m.metrics.measured)
    assert labels.count("Pair error") == pairs > 0 and labels.count("Test error") == len(labels) - pairs
    captions = [c.value for c in at.caption]
    assert captions.count(PAIR_ERROR) == pairs
    assert any("stopped after 26.8 of the 100 epochs" in c for c in captions)  # capsnet-mnist's fractional epochs


def test_the_home_intro_says_the_papers_intent_for_length_not_a_fact_of_the_models():
    """Issue 50: "its length is the probability" stated as fact, while the tour measures 98% of the
    primary capsules longer than 0.9; the intro says the intent and where it is measured."""
    from capsviz.analysis.steps import SATURATED
    from capsviz.analysis.zoo import INTRO

    assert "The papers mean its **length** to represent the probability that an entity" in INTRO
    assert "is the probability" not in INTRO
    assert f"how many are longer than {SATURATED} for the image it follows" in INTRO  # the tour's own threshold
    assert "**tour**" in INTRO and "primary-capsule step" in INTRO
