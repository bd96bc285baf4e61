"""The tour's steps as the page shows them: every sentence is built in the family's tour (capsviz/families/NAME/tour.py, its shared words in capsviz.analysis.steps) from
the numbers its figure draws. Sentence builders on both sides of each rule; every shipped model's
every step quotes only numbers its own figure data holds; the grid in a title is the model's."""

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from synthetic import synthetic_digits

from capsviz.analysis import lab, rule_words, rules, why_steps
from capsviz.analysis.lab import Row
from capsviz.analysis.steps import (
    SATURATED,
    capsnet_length,
    coupling_words,
    efficient_length,
    lab_words,
    loudest_words,
    margin_words,
    near_uniform_words,
    pose_words,
    prediction_words,
    saturation_words,
    squash_words,
)
from capsviz.analysis.tour import tour_of, walk
from capsviz.checkpoint import list_checkpoints, load_checkpoint
from capsviz.config import preset
from capsviz.families.capsnet.tour import capsnet_steps, capsnet_tour, not_own_words, trained_words
from capsviz.families.efficient_capsnet.model import MSE_WEIGHT
from capsviz.glossary import DIGIT_WORDS, class_words
from capsviz.models import build_model
from capsviz.routing import ROUTINGS

SHIPPED = sorted((Path(__file__).resolve().parents[1] / "checkpoints").glob("*.safetensors"))
NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+%?|(?<![\w.,])\d+%")
# numbers a step may quote that are not measurements: the rules' thresholds, the margin loss's
# targets, what the tour calls a long capsule, Efficient-CapsNet's decoder loss weight, evenness's two
# ends (100% spread evenly, 0% all to one)
CONSTANTS = [rules.NEAR_UNIFORM_ENTROPY, rules.NEAR_UNIFORM_SHARE, SATURATED, 0.9, 0.1, MSE_WEIGHT, 1.0, 0.0]


# ---------- sentence builders, both sides of each rule ----------


def test_squash_words_say_when_rounding_hides_the_squash():
    # |s| = 1.3451 rounds to 1.35, which squashes to 0.6457 (0.65), while the exact |v| is 0.6441 (0.64)
    said = squash_words("s_7", "v_7", 1.3451, capsnet_length(1.3451), capsnet_length)
    assert said.startswith("|s_7| = 1.35 squashes to |v_7| = 0.64") and "rounded" in said
    # |s| = 1.3549 rounds to 1.35 -> 0.65, the exact |v| 0.6473 also 0.65: nothing to add
    said = squash_words("s_7", "v_7", 1.3549, capsnet_length(1.3549), capsnet_length)
    assert said == "|s_7| = 1.35 squashes to |v_7| = 0.65"
    # Efficient-CapsNet's squash: 1 - e^-0.32 = 0.274 (0.27) from 0.32, and 1 - e^-0.316 = 0.271 too
    assert squash_words("s", "v", 0.316, efficient_length(0.316), efficient_length) == "|s| = 0.32 squashes to |v| = 0.27"
    assert "rounded" in squash_words("s", "v", 0.3249, efficient_length(0.3249), efficient_length)  # 0.32 -> 0.27, exact 0.277 -> 0.28


@pytest.mark.parametrize(
    "entropy, share, verdict, quoted",
    [
        (
            0.96,
            0.14,
            "are near uniform: their evenness is 96.0% (100% = spread evenly over all 10 classes), more than 95%, and the predicted class gets 0.14",
            [],
        ),
        (
            0.96,
            0.16,
            "are away from uniform: their evenness is 96.0% (100% = spread evenly over all 10 classes), more than 95%, but the predicted class gets 0.16",
            ["1.5 times the uniform 0.10"],
        ),
        (
            0.95,
            0.10,
            "are away from uniform: their evenness is 95.0% (100% = spread evenly over all 10 classes), not more than 95% (the predicted class gets 0.10",
            [],
        ),
        (0.951, 0.10, "are near uniform: their evenness is 95.1% (100% = spread evenly over all 10 classes), more than 95%, and", []),
    ],
)
def test_near_uniform_words_say_the_verdict_the_deciding_part_and_the_whole_rule(entropy, share, verdict, quoted):
    said = near_uniform_words(entropy, share, 0.1, "its couplings")
    assert f"its couplings {verdict}" in said
    assert all(q in said for q in quoted)
    assert said.endswith(rules.RULES["near uniform"])  # the whole rule, whichever part decided


def test_saturation_words_warn_only_when_most_capsules_are_long():
    lengths = np.array([0.95, 0.92, 0.5, 0.3])  # half long: no warning
    said, warn = saturation_words(lengths, "digit")
    assert not warn and said == "Measured here: 50% of the 4 primary capsules are longer than 0.9 (lengths 0.30 to 0.95)."
    said, warn = saturation_words(np.array([0.95, 0.92, 0.91, 0.3]), "digit")
    assert warn and "75% of the 4" in said and "hardly tells where the digit is" in said


def test_coupling_words_call_near_uniform_by_the_rule_and_say_when_long_predictions_move():
    shown = np.array([0.1, 0.2])
    near = {"mean": 0.101, "weighted": 0.16, "entropy_mean": 0.999}
    said = coupling_words(1, near, shown, 1152, 10, "7")
    assert "0.10 to 0.20" in said and "is 0.101 (uniform 0.100)" in said and "Weighted by prediction length the mean is 0.160" in said
    assert "are near uniform: their evenness is 99.9%" in said
    assert rule_words.long_votes_words("7", 0.16, 0.1, 0.101) in said  # the one sentence /routing and /multimnist say
    assert "Weighted by prediction length, 7 gets 0.160, 1.6 times uniform: routing moves mainly" in said
    said = coupling_words(1, near | {"weighted": 0.149}, shown, 1152, 10, "7")  # below 1.5 x uniform: no such claim
    assert "are near uniform" in said and "routing moves" not in said
    said = coupling_words(1, {"mean": 0.2, "weighted": 0.3, "entropy_mean": 0.97}, shown, 1152, 10, "7")
    assert (
        "are away from uniform: their evenness is 97.0% (100% = spread evenly over all 10 classes), more than 95%, but the predicted class gets 0.20"
        in said
    )
    assert "routing moves mainly" not in said and "routing moves the capsules with long predictions more than the rest" in said
    assert "uniform" not in coupling_words(0, near, shown, 1152, 10, "7").split("(uniform 0.100)")[1]  # iteration 1: no verdict


def row(run_with, error, trained="self-attention", n=10_000, entropy=0.9, share=0.26):
    return Row("m", trained, run_with, error, n, 0, 0, 1000, entropy, share, 0.0)


def test_lab_words_answer_uniform_and_random_against_the_models_own_routing():
    rows = [row("self-attention", 0.33), row("uniform", 0.39), row("random", 82.18), row("dynamic", 0.35)]
    said, quoted = lab_words(rows, lab.LAB_ROUTINGS)
    uniform = next(s for s in said if s.startswith("Run with uniform"))
    band = rules.noise(0.39, 10_000, 0.33, 10_000)
    assert "0.39% of 10,000 test images, against 0.33% with its own self-attention" in uniform
    assert f"a gap of 0.06 points, within the ±{band:.2f} chance gives" in uniform
    random = next(s for s in said if s.startswith("Run with fixed random"))
    assert "81.85 points worse, more than" in random
    assert any(s.startswith("The tallest bar is fixed random couplings (82.18%)") for s in said)  # the largest bar explained
    assert any("its couplings are away from uniform: their evenness is 90.0%" in s for s in said)
    assert pytest.approx(band) in quoted["gaps"]
    # better beyond chance, and the tallest bar the model's own: nothing to explain
    said, _ = lab_words(
        [row("dynamic", 2.0, trained="dynamic", entropy=0.999, share=0.102), row("uniform", 1.0, trained="dynamic")], lab.LAB_ROUTINGS
    )
    assert "1.00 points better, more than" in said[0] and not any("tallest" in s for s in said)
    assert "its couplings are near uniform: their evenness is 99.9%" in said[-1]
    assert lab_words([row("uniform", 1.0)], lab.LAB_ROUTINGS) == ([], {})  # the model's own routing not measured


def test_lab_words_judge_a_pair_reading_model_on_pairs_too():
    def pairs(run_with, error, accuracy):
        return replace(row(run_with, error, trained="dynamic", entropy=0.999, share=0.102), pair_accuracy=accuracy, n_pairs=10_000)

    # digit error worse beyond chance, pair accuracy within chance: both said, each by its own measure
    said, _ = lab_words([pairs("dynamic", 15.17, 74.24), pairs("uniform", 16.50, 74.29)], lab.LAB_ROUTINGS)
    assert "16.50% of 10,000 single test digits, against 15.17%" in said[0] and "1.33 points worse" in said[0]
    band = rules.noise(74.29, 10_000, 74.24, 10_000)
    assert "74.29% of 10,000 test pairs right, against 74.24%" in said[1]
    assert f"a gap of 0.05 points, within the ±{band:.2f} chance gives" in said[1]
    # pair accuracy lower beyond chance: "worse"; higher: "better"
    said, _ = lab_words([pairs("dynamic", 6.10, 91.28), pairs("uniform", 8.10, 88.00)], lab.LAB_ROUTINGS)
    assert "3.28 points worse, more than" in said[1]
    said, _ = lab_words([pairs("dynamic", 6.10, 88.00), pairs("uniform", 6.10, 91.28)], lab.LAB_ROUTINGS)
    assert "3.28 points better, more than" in said[1]
    # a model that reads single images says nothing about pairs
    said, _ = lab_words([row("dynamic", 2.0, trained="dynamic"), row("uniform", 1.0, trained="dynamic")], lab.LAB_ROUTINGS)
    assert not any("pairs" in s for s in said) and "test images" in said[0]


# ---------- grid sizes come from the model ----------


@pytest.mark.parametrize("size, grid", [(28, 6), (32, 8), (36, 10)])
def test_the_primary_grid_in_the_title_is_the_models(size, grid):
    torch.manual_seed(0)
    model = build_model(preset("capsnet-small", in_size=size)).eval()
    assert model.config.primary_grid == grid
    image = np.zeros((size, size), np.float32)
    image[size // 4 : size // 2, size // 3 : size // 2] = 1
    tour = capsnet_tour(model, image)
    steps = walk(tour, [str(k) for k in range(10)], DIGIT_WORDS, "tiny", "3", "grey levels", [])
    primary = next(s for s in steps if s.key == "primary")
    article = "an" if grid == 8 else "a"
    assert primary.title == f"PrimaryCaps: vectors on {article} {grid}x{grid} grid"
    assert primary.data["lengths"].shape == (grid, grid)  # what the figure draws
    assert f"at each of {grid}x{grid} positions" in primary.text[0] and f"each of the {grid}x{grid} positions" in primary.caption
    assert capsnet_steps(3, DIGIT_WORDS, grid)[2].title == primary.title
    assert capsnet_steps(3)[2].title == "PrimaryCaps: vectors on a grid of positions"  # no grid given: no size claimed


# ---------- every shipped model, every step: the text quotes the figure's numbers ----------


def numbers_in(value) -> list[float]:
    """Every number in a step's figure data (arrays, lists, dicts of them), text left out."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in numbers_in(v)]
    if isinstance(value, list | tuple):
        return [x for v in value for x in numbers_in(v)]
    if isinstance(value, np.ndarray) and value.dtype.kind in "fiub":
        return value.astype(float).ravel().tolist()
    if isinstance(value, int | float | np.floating | np.integer) and not isinstance(value, bool):
        return [float(value)]
    return []


def matches(token: str, values: list[float]) -> bool:
    body = token.rstrip("%")
    places = len(body.split(".")[1]) if "." in body else 0
    if token.endswith("%"):
        return any(f"{v:.{places}%}" == token or f"{v:.{places}f}%" == token for v in values)
    return any(f"{v:.{places}f}" == token for v in values)


def follow(path: Path, seed: int):
    model, meta = load_checkpoint(path)
    S, C = meta.config.in_size, meta.config.in_channels
    images, labels = synthetic_digits(2, seed)
    pad = (S - 28) // 2
    image = np.pad(images[0].astype(np.float32) / 255, ((pad, S - 28 - pad), (pad, S - 28 - pad)))
    image = np.repeat(image[None], 3, 0) if C == 3 else image
    tour = tour_of(meta.config).follow(model, image)
    have = lab.stored_rows([(path, meta)], ROUTINGS) if lab.fits(meta.config) else {}
    rows = [have[path.stem, r] for r in ROUTINGS if (path.stem, r) in have]
    names = [str(n) for n in meta.class_names]
    return tour, walk(tour, names, class_words(meta), path.stem, str(labels[0]), "the input", rows, meta.config), rows


TOURED = [p for p in SHIPPED if tour_of(load_checkpoint(p)[1].config) is not None]


@pytest.mark.parametrize("path", TOURED, ids=[p.stem for p in TOURED])
def test_every_number_a_shipped_models_step_quotes_is_its_figures(path):
    tour, steps, rows = follow(path, seed=1)
    for step in steps:
        d = step.data
        said = " ".join([*step.text, step.measured, step.caption])
        values = numbers_in(d) + CONSTANTS
        for token in NUMBER.findall(said):
            assert matches(token, values), (path.stem, step.key, token, said)
        # the summaries the text quotes are the figure's own arrays summed up
        if step.figure == "routing" and "mean" in d:
            W = d["winner"]
            assert d["mean"] == pytest.approx(d["c"][:, W].mean()) and d["entropy_mean"] == pytest.approx(d["entropy"].mean())
            assert d["weighted"] == pytest.approx((d["c"][:, W] * d["weights"]).sum() / d["weights"].sum())
            np.testing.assert_allclose(d["s_len"], np.linalg.norm(tour.s[d["t"], [tour.winner, tour.runner_up]], axis=-1), rtol=1e-6)
        if step.key == "primary" and "long" in d:
            assert d["long"] == (d["all_lengths"] > SATURATED).mean()
            np.testing.assert_allclose(d["lengths"], d["all_lengths"].max(-1))
        if "share" in d and step.key == "routing":
            assert d["share"] == pytest.approx(d["values"][:, tour.winner].mean())
    if rows:  # the lab step answers both questions and explains its tallest bar
        said = " ".join(steps[-1].text)
        assert all(f"Run with {lab.LAB_ROUTINGS[r]}" in said for r in ("uniform", "random") if r != rows[0].trained_with)
        tallest = max(rows, key=lambda r: r.test_error)
        own = next(r for r in rows if r.run_with == r.trained_with)
        beyond = rules.beyond_chance(tallest.test_error, tallest.n_test, own.test_error, own.n_test)
        tallest_said = f"The tallest {'test-error ' if own.pair_accuracy is not None else ''}bar is {lab.LAB_ROUTINGS[tallest.run_with]}"
        assert (tallest_said in said) == (tallest is not own and beyond)  # with a pair chart beside: which chart it means
        reads_pairs = own.pair_accuracy is not None
        assert ("pairs" in steps[-1].data) == reads_pairs and ("test pairs right" in said) == reads_pairs
        if reads_pairs:  # the pair figure draws the very accuracies the text quotes
            assert steps[-1].data["pairs"] == [r.pair_accuracy for r in rows]


@pytest.mark.parametrize("path", [p for p in TOURED if "capsnet-mnist" == p.stem or "efficient" in p.stem])
def test_text_and_figure_quote_the_same_lengths(path, monkeypatch):
    """The routing figure writes the very |s| and |v| the text quotes (the full 16 numbers, not the
    drawn projection), and squashing the quoted |s| gives the quoted |v| or the text says it is rounded."""
    import capsviz.viz.animation as animation

    tour, steps, _ = follow(path, seed=2)
    drawn = {}
    monkeypatch.setattr(animation, "dynamic_pieces", lambda *a, **kw: drawn.update(lengths=a[-1]))
    for step in steps:
        if step.figure != "routing" and step.key != "routing":
            continue
        s_len, v_len = step.data["s_len"], step.data["v_len"]
        W = 0 if step.figure == "routing" else tour.winner
        quoted = re.search(r"\|s_\S+\| = (\d+\.\d+) squashes to \|v_\S+\| = (\d+\.\d+)( \(both rounded)?", " ".join(step.text))
        assert quoted and quoted.group(1) == f"{s_len[W]:.2f}" and quoted.group(2) == f"{v_len[W]:.2f}"
        squash = capsnet_length if step.figure == "routing" else efficient_length
        assert (f"{squash(float(quoted.group(1))):.2f}" == quoted.group(2)) == (quoted.group(3) is None)
        if step.figure == "routing":
            animation.tour_routing_pieces(tour, [str(k) for k in range(10)], step.data["t"])
            np.testing.assert_allclose(drawn["lengths"], np.stack([s_len, v_len], -1))


def test_the_site_titles_the_primary_step_with_the_models_grid():
    from capsviz.site import _model_entry

    path = next(p for p in SHIPPED if p.stem == "capsnet-multimnist")  # 36x36 pairs: a 10x10 grid
    model, meta = load_checkpoint(path)
    titles = [s["title"] for s in _model_entry(path, model, meta, {}, "x")["tour"]]
    assert "PrimaryCaps: vectors on a 10x10 grid" in titles


def test_the_shipped_efficient_capsnets_lab_step_on_the_page(real_data, monkeypatch, tmp_path):
    """The page lays out the core's step: every sentence of it, a short chart title, a short link."""
    from streamlit.testing.v1 import AppTest
    from test_app import router_mode  # noqa: F401 - app.py's router in charge, as served

    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(SHIPPED[0].parent))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    app = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120)
    app.query_params["model"] = "efficient-capsnet-mnist.safetensors"
    app.query_params["step"] = "11"  # after the chapter's three steps
    app.run()
    assert not app.exception, app.exception
    assert "Does routing matter?" in app.get("progress")[0].proto.text
    shown = " ".join(m.value for m in app.markdown)
    assert "Run with uniform couplings (no routing)" in shown and "Run with fixed random couplings" in shown
    assert "The tallest bar is fixed random couplings" in shown
    # the rule was said in full at the routing step: here a pointer to it, not the same lines again
    assert "near-uniform rule (stated in full at the routing step)" in shown and rules.RULES["near uniform"] not in shown
    chart = app.get("plotly_chart")[0].proto.spec
    assert json.loads(chart)["layout"]["title"]["text"] == "Test error by routing"
    assert [link.label for link in app.get("page_link") if 'page: "lab"' in str(link.proto)] == ["Open the routing lab"]


@pytest.mark.parametrize("model", [p.name for p in TOURED])  # the MultiMNIST models too: a test digit on their canvas
def test_every_step_of_a_shipped_models_tour_on_the_page(real_data, monkeypatch, tmp_path, model):
    """The page walks every step of the tour of a shipped model with no error, each step titled as the core titles it."""
    from streamlit.testing.v1 import AppTest
    from test_app import router_mode  # noqa: F401 - app.py's router in charge, as served

    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(SHIPPED[0].parent))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    app = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120)
    app.query_params["model"] = model
    app.run()
    _, meta = load_checkpoint(SHIPPED[0].parent / model)
    titles = []
    while True:
        assert not app.exception, app.exception
        titles.append(app.get("progress")[0].proto.text.split(": ", 1)[1].strip("*"))
        if app.button(key="tour_next").disabled:
            break
        app.button(key="tour_next").click().run()
    iterations = meta.config.routing_iterations if meta.config.routing != "self-attention" else 1
    grid = meta.config.primary_grid if meta.config.routing == "dynamic" else None
    chapter = why_steps.chapter_for(meta, list_checkpoints(SHIPPED[0].parent), Path(model).stem)
    own = [s.title for s in tour_of(meta.config).steps(iterations, class_words(meta), grid)]
    assert titles == why_steps.titles(chapter) + own + ["Where I stand"]  # the chapter first, the student's standing last
    if grid:
        assert f"PrimaryCaps: vectors on a {grid}x{grid} grid" in titles


# ---------- what the model was trained with, predictions, the margin, the matrix tour's layers ----------


def test_trained_words_name_the_models_couplings_and_whether_the_iterations_shown_are_its_own():
    from capsviz.registry import ONE_ITERATION

    assert trained_words("dynamic", 3, 3) == ("dynamic routing, 3 iterations", True)
    assert trained_words("uniform", 3, 3) == ("uniform couplings (no routing)", False)
    assert trained_words("random", 3, 3) == ("fixed random couplings", False)
    label, own = trained_words("dynamic", 1, 1)
    assert label.startswith(ONE_ITERATION) and "stay uniform" in label and own
    assert trained_words("dynamic", 1, 3)[1] is False  # three iterations shown on a one-iteration model: not its own


@pytest.mark.parametrize(
    "name, trained, own",
    [
        ("capsnet-mnist", "dynamic routing, 3 iterations", True),
        ("capsnet-small-random-mnist", "fixed random couplings", False),
        ("capsnet-small-uniform-mnist", "uniform couplings (no routing)", False),
        ("capsnet-one-iteration-mnist", "dynamic routing, 1 iteration (with 1 iteration the couplings stay uniform", True),
    ],
)
def test_the_tour_says_what_the_model_was_trained_with_at_step_1_and_at_every_iteration(name, trained, own):
    tour, steps, rows = follow(Path(__file__).resolve().parents[1] / "checkpoints" / f"{name}.safetensors", seed=1)
    first = steps[0].text[0]
    assert f"trained with {trained}" in first
    assert "routing by agreement" not in first and "a CapsNet with dynamic routing" not in first
    label = trained_words(
        *(
            ("dynamic", 1, 1)
            if "one-iteration" in name
            else ("random" if "random" in name else "uniform" if "uniform" in name else "dynamic", 3, 3)
        )
    )[0]
    said = not_own_words(label)
    iterations = [s for s in steps if s.key.startswith("iteration")]
    assert len(iterations) >= 1
    for step in [steps[0], *iterations]:
        assert (said in " ".join(step.text)) == (not own), step.key
    (lengths,) = [s for s in steps if s.key == "lengths"]  # the model's own answer, not dynamic routing's (its own test below)
    assert (said in " ".join(lengths.text)) is False
    if rows:  # the lab step names its own routing the same way: not "uniform couplings" for one iteration, not a bare key
        lab_text = " ".join(steps[-1].text)
        assert f"with its own {trained.split(' (')[0]}" in lab_text or f"with its own {lab.LAB_ROUTINGS[rows[0].trained_with]}" in lab_text
        assert "its own uniform couplings" not in lab_text if "one-iteration" in name else True
        assert not re.search(r"its own (dynamic|random|uniform)[:;,.]", lab_text)


@pytest.mark.parametrize(
    "lengths, expected",
    [
        # the capsule predicts 7 loudest: its longest
        (
            [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.75, 0.9, 1.2],
            "predicts 7 with length 1.75, its longest prediction; the next longest is for 9 (1.20)",
        ),
        # review's case: 9 = 2.60 and 4 = 2.59 both longer than 7's 1.75
        (
            [0.1, 0.2, 0.3, 0.4, 2.59, 0.6, 0.7, 1.75, 0.9, 2.60],
            "predicts 7 with length 1.75, only its third longest: its longest prediction is for 9 (2.60), then 4 (2.59)",
        ),
        (
            [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 1.75, 0.9, 2.60],
            "predicts 7 with length 1.75, only its second longest: its longest prediction is for 9 (2.60);",
        ),
    ],
)
def test_prediction_words_say_where_the_predicted_class_stands_in_the_row(lengths, expected):
    said = prediction_words("type 14 at row 6, col 3", np.array(lengths), [str(j) for j in range(10)], 7, "digit")
    assert expected in said and "one capsule predicts every digit, some louder than others." in said
    assert "its shortest is for 0 (0.10)" in said
    assert "next longest prediction is for 9 (2.60)" not in said


@pytest.mark.parametrize(
    "lengths, right, verdict, quoted",
    [
        (
            [0.02, 0.01, 0.03, 0.05, 0.01, 0.02, 0.01, 0.97, 0.02, 0.04],
            7,
            "meets both targets",
            ["7, has 0.97, above 0.9", "shorter than 0.1 (the longest of them, 3, 0.05)"],
        ),
        (
            [0.02, 0.01, 0.03, 0.96, 0.01, 0.02, 0.01, 0.99, 0.02, 0.04],
            7,
            "does not meet",
            ["1 of the other 9 is not shorter than 0.1 (the longest, 3, 0.96)"],
        ),
        ([0.02, 0.01, 0.03, 0.05, 0.01, 0.02, 0.01, 0.85, 0.02, 0.04], 7, "does not meet", ["7, has 0.85, not above 0.9"]),
        (
            [0.02, 0.01, 0.03, 0.05, 0.01, 0.02, 0.01, 0.95, 0.14, 0.04],
            None,
            "does not meet",
            ["the longest capsule, 7,", "(the longest, 8, 0.14)"],
        ),
    ],
)
def test_margin_words_say_whether_the_lengths_meet_the_margin_losss_targets(lengths, right, verdict, quoted):
    said = margin_words(np.array(lengths), [str(j) for j in range(10)], right)
    assert verdict in said and all(q in said for q in quoted), said


def test_every_shipped_lengths_step_quotes_the_runner_up_against_the_margin():
    for path in [p for p in TOURED if p.stem in ("capsnet-fashion-mnist", "capsnet-small-random-mnist", "efficient-capsnet-mnist")]:
        tour, steps, _ = follow(path, seed=1)
        (step,) = [s for s in steps if s.key == "lengths"]
        values = step.data["values"]
        j = step.data.get("label", int(values.argmax()))
        others = np.delete(values, j)
        assert f"has {values[j]:.2f}" in step.measured and f"{others.max():.2f})" in step.measured
        assert ("meets both targets" in step.measured) == (values[j] > 0.9 and others.max() < 0.1)


def test_the_matrix_tour_names_the_layers_it_shows_and_links_to_an_app_page():
    path = next(p for p in TOURED if p.stem == "matrix-small-mnist")
    tour, steps, _ = follow(path, seed=1)
    by = {s.key: s for s in steps}
    H2, W2, K2 = tour.class_layer_in
    assert (
        "PrimaryCaps layer" in by["primary"].text[0]
        and f"ConvCaps2's {H2 * W2 * K2} capsules ({K2} types at each of {H2}x{W2} positions)" in by["primary"].text[0]
    )
    assert "PrimaryCaps type" in by["primary"].caption
    table = by["iteration1"].table
    assert all(n.startswith("ConvCaps2 type") for n in table["lower capsule (ConvCaps2)"])
    said = " ".join(s for step in steps for s in [*step.text, step.measured, step.caption])
    assert "RESULTS.md" not in said
    page, _ = by["activations"].link
    assert (Path(__file__).resolve().parents[1] / page).is_file()


def test_the_efficient_tours_routing_step_explains_c_as_efficient_capsnet_computes_it():
    from capsviz.glossary import help_text

    path = next(p for p in TOURED if "efficient" in p.stem)
    _, steps, _ = follow(path, seed=1)
    (step,) = [s for s in steps if s.key == "routing"]
    note = help_text(*step.terms)
    assert "Efficient-CapsNet has no iterations: its couplings are the softmax of the self-attention agreement a_ji" in note


@pytest.mark.parametrize(
    "name",
    ["capsnet-mnist", "capsnet-multimnist", "capsnet-small-random-mnist", "capsnet-small-random-multimnist", "capsnet-small-uniform-mnist"],
)
def test_the_lengths_step_shows_the_models_own_answer_as_its_forward_pass_gives_it(name):
    """A model trained without dynamic routing: the lengths step draws its forward pass as trained
    (its own couplings), names them, and quotes dynamic routing's winner from the figure's data;
    a model trained with dynamic routing: the bars are the routing steps' last lengths, as before."""
    path = Path(__file__).resolve().parents[1] / "checkpoints" / f"{name}.safetensors"
    tour, steps, _ = follow(path, seed=1)
    model, meta = load_checkpoint(path)
    (step,) = [s for s in steps if s.key == "lengths"]
    (rec,) = [s for s in steps if s.key == "reconstruction"]
    with torch.no_grad():
        forward = model(torch.as_tensor(tour.image)[None, None], reconstruct=False).scores[0].numpy()
    values = step.data["values"]
    np.testing.assert_allclose(values, forward, rtol=1e-5, atol=1e-6)  # the bars are the model's own answer
    W = int(values.argmax())
    assert step.data["highlight"] == W and f"**{W}** with length {values[W]:.2f}" in step.text[0]
    assert f"capsule {W} alone" in rec.text[0]  # the decoder redraws the answer the bars show
    said = " ".join(step.text)
    own = meta.config.couplings == "dynamic"
    assert own == tour.own and ("dynamic" in step.data) == (not own)
    if own:
        np.testing.assert_allclose(values, tour.lengths)
        assert "Several capsules can be long at once" in said and "these bars are its own answer" not in said
        return
    trained = "fixed random couplings" if "random" in name else "uniform couplings"
    assert step.data["title"].endswith(f"with its own {trained}") and f"trained with {trained}" in said
    assert "these bars are its own answer" in said and "two overlapping digits" not in said
    routed = step.data["dynamic"]  # dynamic routing's lengths, from the steps before
    np.testing.assert_allclose(routed, tour.lengths)
    D = int(routed.argmax())
    assert f"there {D} was longest, with {routed[D]:.2f}, {'the same' if D == W else 'another'} winner" in said
    assert not np.allclose(values, routed)  # the two routings do differ on this image


def test_the_prediction_table_has_a_row_per_class_and_a_column_per_primary_capsule_followed():
    """Step 4 fits a phone: ten rows (the class names, the winner's marked), six columns P1-P6 named in
    the caption; the first column is the capsule the text speaks of, with the numbers it quotes."""
    tour, steps, _ = follow(Path(__file__).resolve().parents[1] / "checkpoints" / "capsnet-mnist.safetensors", seed=1)
    (step,) = [s for s in steps if s.key == "predictions"]
    d = step.data
    W = tour.winner
    assert d["values"].shape == (10, 6) and d["rows"] == [str(j) for j in range(10)] and d["highlight_row"] == W
    assert d["columns"] == [f"P{n}" for n in range(1, 7)] and "highlight" not in d
    np.testing.assert_allclose(d["values"], tour.pred_len.T)
    assert all(f"P{n + 1} = {where}" in step.caption for n, where in enumerate(tour.shown_names))
    first = d["values"][:, 0]
    assert step.measured.startswith(
        f"Measured here: the first column, P1 ({tour.shown_names[0]}), whose own length |u_i| is {d['primary'][0]:.2f}, "
        f"predicts {W} with length {first[W]:.2f}"
    )
    assert f"its shortest is for {int(first.argmin())} ({first.min():.2f})" in step.measured


def test_prediction_words_never_call_a_long_prediction_confident_and_say_what_decides_on_both_sides():
    """Issue 50: "a long prediction is a confident one" beside a capsule whose predictions for 9 and 4
    are longer than its prediction for 7, on an image of a 7. The words follow the rank of the
    predicted class in the capsule's row: its longest, or not (then its length does not decide)."""
    names = [str(j) for j in range(10)]
    not_longest = prediction_words("P1", np.array([0.11, 0.2, 0.3, 0.4, 2.59, 0.6, 0.7, 1.75, 0.9, 2.60]), names, 7, "digit", 0.99)
    assert "whose own length |u_i| is 0.99, predicts 7 with length 1.75" in not_longest
    assert "from one vector and a different W for each." in not_longest
    assert "Its vote for 9 is longer than its vote for 7, yet 7 is the digit routing picks" in not_longest
    assert "length alone does not decide" in not_longest
    longest = prediction_words("P1", np.array([0.11, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 2.75, 0.9, 2.60]), names, 7, "digit", 0.99)
    assert "Here its longest vote is for 7, the digit routing picks; a vote's weight still comes from its coupling." in longest
    assert "yet" not in longest
    for said in (not_longest, longest):
        assert "confiden" not in said


def test_the_prediction_step_says_length_comes_from_u_and_W_and_weight_from_the_coupling():
    tour, steps, _ = follow(next(p for p in TOURED if p.stem == "capsnet-mnist"), seed=1)
    step = next(s for s in steps if s.key == "predictions")
    text = " ".join(step.text)
    assert "confident" not in text and "A prediction's length is not a confidence" in text
    assert (
        "primary capsule's own length |u_i|" in text
        and "stretched or shrunk by W_ij" in text
        and "is its c_ij (coupling), which routing now sets" in text
    )
    np.testing.assert_allclose(step.data["primary"], tour.primary_len.reshape(-1)[tour.shown])  # the caption's |u_i|
    assert f"whose own length |u_i| is {step.data['primary'][0]:.2f}" in step.measured


@pytest.mark.parametrize(
    "shown, mean, said",
    [
        # issue 50: the loudest six at 0.21 to 0.56 beside a mean of 0.103: one sentence reconciles them
        ([0.21, 0.56], 0.103, "but they are 2 of 1,152: averaged over all 1,152 primary capsules the coupling to 7 is 0.103"),
        ([0.21, 0.56], 0.103, "All of the 2 loudest reach 1.5 times uniform or more (up to 0.56), yet the mean over all 1,152"),
        ([0.14, 0.23], 0.101, "1 of the 2 loudest reaches 1.5 times uniform or more (up to 0.23)"),
        ([0.10, 0.149], 0.103, ": neither the loudest few nor the mean has reached 1.5 times uniform."),
        ([0.21, 0.56], 0.16, ": the mean has moved to 1.5 times uniform or more, not only the loudest few."),
    ],
)
def test_loudest_words_reconcile_the_loudest_few_with_the_mean_on_both_sides_of_the_factor(shown, mean, said):
    assert said in loudest_words(np.array(shown), mean, 1152, 10, "7")


def test_the_near_uniform_rule_is_said_once_in_a_tour_and_referred_to_after():
    rule = rules.RULES["near uniform"]
    assert near_uniform_words(0.99, 0.1, 0.1, "they").endswith(rule)
    later = near_uniform_words(0.99, 0.1, 0.1, "they", "iteration 2")
    assert rule not in later and later.startswith("By the routing lab's near-uniform rule (stated in full at iteration 2), they are near")
    for path in TOURED:
        _, steps, _ = follow(path, seed=1)
        said = [" ".join([*s.text, s.measured]) for s in steps]
        with_verdict = [t for t in said if "near uniform" in t or "away from uniform" in t]
        assert sum(rule in t for t in said) == (1 if with_verdict else 0), path.stem
        first = next((i for i, t in enumerate(said) if rule in t), None)
        assert all("stated in full at" in t for t in with_verdict if said.index(t) != first), path.stem
        assert not any("of its entropy" in t or "nats" in t for t in said), path.stem


def test_pose_words_claim_no_meaning_and_say_whether_the_entries_could_be_a_rotations():
    """Issue 50: a pose with entries 7.8 and -9.1 was called "position, orientation, scale"."""
    wide = pose_words(np.array([[7.8, -9.1, 0.0, 0.0]] + [[0.5] * 4] * 3))
    assert wide.startswith("Measured here: the 16 entries of this pose run from -9.100 to 7.800; a rotation matrix keeps")
    assert "so this is not one" in wide and "learned, not given" in wide
    narrow = pose_words(np.eye(4) * 0.9)
    assert "all between -1 and 1 as a rotation matrix's would be, though that alone does not make it one" in narrow
    assert "not one:" not in narrow
    for said in (wide, narrow):
        assert "position, orientation, scale" not in said


def test_the_em_tour_calls_the_pose_a_learned_matrix_and_quotes_its_table():
    path = next(p for p in TOURED if load_checkpoint(p)[1].config.routing == "em")
    tour, steps, _ = follow(path, seed=1)
    first = " ".join(steps[0].text)
    assert "learned 4x4 matrix, which the paper intends to hold the thing's pose" in first
    assert "position, orientation, scale" not in first and "Nothing in training makes the matrix a rotation" in first
    primary = next(s for s in steps if s.key == "primary")
    assert primary.measured == pose_words(primary.data["pose"]) and f"{tour.pose.min():.3f} to {tour.pose.max():.3f}" in primary.measured
