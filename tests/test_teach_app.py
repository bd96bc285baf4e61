"""AppTest of the teaching pages (routing playgrounds, guided tour) over test_app's tiny checkpoints."""

import re

import numpy as np
import pandas as pd
import pytest
import test_app
import torch

from capsviz.analysis.playground import DYNAMIC_PRESETS, EM_PRESETS, dynamic_toy, em_toy
from capsviz.checkpoint import load_checkpoint, save_checkpoint
from capsviz.config import preset
from capsviz.data import load_split
from capsviz.families.capsnet.tour import capsnet_tour
from capsviz.families.efficient_capsnet.tour import efficient_tour
from capsviz.models import build_model
from capsviz.text import MAX_CHARS

# test_app's fixtures: tiny checkpoints and synthetic data (app), app.py's router in charge (autouse)
app = test_app.app
router_mode = test_app.router_mode


@pytest.fixture
def efficient_app(app):
    """test_app's app with a tiny Efficient-CapsNet beside its tiny checkpoints, its prior not zero."""
    torch.manual_seed(0)
    model = build_model(preset("efficient-capsnet", conv_channels=(8, 16, 16, 32), primary_caps=4, decoder_hidden=(32, 64)))
    with torch.no_grad():
        model.b.normal_(-0.1, 0.02)  # all negative, as in the trained model: the page says so
    save_checkpoint(app.folder / "tiny-efficient.safetensors", model, {"dataset": "mnist", "epochs": 1})
    return app


def table(app, key):
    """A playground table by its place: the lower capsules' numbers first, the upper capsules' second."""
    return app.dataframe[0 if key.endswith("table") else 1].value


def point_slider(app, toy, lower, upper, axis):
    """The slider of one coordinate (the keys carry a generation that a new preset bumps)."""
    return next(s for s in app.slider if s.key.startswith(f"pg_{toy}_pt_") and s.key.endswith(f"_{lower}_{upper}_{axis}"))


def test_dynamic_playground_shows_the_routing_functions_couplings(app):
    app.switch_page("pages/playground.py").run()
    assert not app.exception, app.exception
    assert app.query_params["toy"] == "dynamic"
    app.selectbox(key="pg_dynamic_preset").set_value("outliers").run()
    c = table(app, "pg_dyn_table")
    expected = dynamic_toy(DYNAMIC_PRESETS["outliers"][:, :2], 3)
    np.testing.assert_allclose(c["c to 1"], expected.c[2, :, 0], atol=1e-9)
    said = app.info[0].value  # each capsule's largest coupling, as the table shows it
    cluster = ", ".join(f"{k + 1} ({x:.3f})" for k, x in enumerate(c["c to 1"][:4]))
    assert f"lower capsules {cluster} send most of their prediction to upper 1" in said
    assert re.search(r"lower capsules 5 \(largest 0\.\d{3}\), 6 \(largest 0\.\d{3}\) are still near uniform", said)
    # move outlier 5's prediction for upper capsule 1 onto the cluster: its coupling follows
    app.selectbox(key="pg_dynamic_cap").set_value(5).run()
    point_slider(app, "dynamic", 4, 0, 0).set_value(1.9).run()
    point_slider(app, "dynamic", 4, 0, 1).set_value(0.5).run()
    assert not app.exception, app.exception
    u = DYNAMIC_PRESETS["outliers"][:, :2].copy()
    u[4, 0] = [1.9, 0.5]
    c = table(app, "pg_dyn_table")
    np.testing.assert_allclose(c["c to 1"], dynamic_toy(u, 3).c[2, :, 0], atol=1e-9)
    assert c["c to 1"][4] > 0.8
    assert app.query_params["pts"] and app.query_params["cap"] == "5"
    # the iteration shown: iteration 1 is uniform
    app.slider(key="pg_t").set_value(1).run()
    np.testing.assert_allclose(table(app, "pg_dyn_table")["c to 1"], 0.5)
    assert app.query_params["t"] == "1"


def test_em_playground_shows_the_routing_functions_assignments(app):
    app.switch_page("pages/playground.py").run()
    app.radio(key="pg_toy").set_value("em").run()
    app.radio(key="pg_em_J").set_value(3).run()
    assert not app.exception, app.exception
    votes, a_in = EM_PRESETS["two clusters"]
    expected = em_toy(votes[:, :3], a_in, 3)
    np.testing.assert_allclose(table(app, "pg_em_table")["R to 1"], expected.R[2, :, 0], atol=1e-6)
    np.testing.assert_allclose(table(app, "pg_em_upper")["a (activation)"], expected.a[2], atol=1e-6)
    app.slider(key="pg_em_lambda").set_value(1.0).run()
    next(s for s in app.slider if s.key.startswith("pg_em_act_") and s.key.endswith("_0")).set_value(
        0.2
    ).run()  # lower capsule 1 now barely present
    a = a_in.copy()
    a[0] = 0.2
    np.testing.assert_allclose(table(app, "pg_em_table")["R to 1"], em_toy(votes[:, :3], a, 3, final_lambda=1.0).R[2, :, 0], atol=1e-6)
    assert "0.33, 0.67, 1.00" in app.info[0].value  # the lambda schedule, in words
    app.radio(key="pg_em_J").set_value(2).run()
    assert "leaves only which one is tighter" in app.info[0].value


def test_a_shared_playground_link_opens_the_same_view(app):
    app.switch_page("pages/playground.py").run()
    app.selectbox(key="pg_dynamic_preset").set_value("outliers").run()
    app.selectbox(key="pg_dynamic_cap").set_value(6).run()
    point_slider(app, "dynamic", 5, 1, 0).set_value(-2.0).run()
    link = dict(app.query_params)
    shown = table(app, "pg_dyn_table")["c to 2"]

    fresh = type(app).from_file(app._script_path, default_timeout=60)
    for k, v in link.items():
        fresh.query_params[k] = v
    fresh.switch_page("pages/playground.py").run()
    assert not fresh.exception, fresh.exception
    assert fresh.selectbox(key="pg_dynamic_cap").value == 6
    np.testing.assert_allclose(table(fresh, "pg_dyn_table")["c to 2"], shown)


def test_the_tour_is_the_first_page_and_walks_every_capsnet_step(app):
    app.run()
    assert not app.exception, app.exception
    assert app.title[0].value == "A guided tour of a capsule network"
    assert app.query_params["step"] == "1"
    seen = []
    for k in range(1, 16):
        assert not app.exception, (k, app.exception)
        seen.append(app.get("progress")[0].proto.text)
        assert app.query_params["step"] == str(k)
        if k < 13:  # the chapter's three steps, then the model's own
            assert app.image or app.dataframe, f"step {k} has no figure"  # the prediction lengths: a table of text
        elif k == 13:  # this test model has not been measured by the lab: the step says so and links there
            assert "has not measured this model yet" in app.info[0].value
            assert any('page: "lab"' in str(link.proto) for link in app.get("page_link"))
        if k == 7:  # one row per digit capsule, one column per primary capsule followed: a phone shows all six
            (frame,) = [f.value for f in app.dataframe]
            assert list(frame.index) == [str(j) for j in range(10)] and list(frame.columns) == [f"P{n}" for n in range(1, 7)]
            (place,) = [c.value for c in app.caption if "P1 = " in c.value]  # longer than a name: shown whole, every column placed
            assert "P6 = " in place and not place.endswith("…") and len(place) > MAX_CHARS
        if app.button(key="tour_next").disabled:
            break
        app.button(key="tour_next").click().run()
    assert [s.split(": ", 1)[1].strip("*") for s in seen] == [
        "Why capsules: invariance against equivariance",
        "Why capsules: parts in the wrong places",
        "Why capsules: pose, not just presence",
        "The input",
        "Conv1: local features",
        "PrimaryCaps: vectors on a 6x6 grid",
        "Predictions u_hat for every digit capsule",
        "Routing, iteration 1 of 3",
        "Routing, iteration 2 of 3",
        "Routing, iteration 3 of 3",
        "DigitCaps: lengths are the answer",
        "The decoder redraws the digit",
        "Does routing matter? This model in the routing lab",
        "Where I stand",
    ]
    app.button(key="tour_back").click().run()
    assert app.query_params["step"] == "13"


def test_tour_routing_steps_show_the_routing_numbers(app):
    app.query_params["step"] = "9"  # a shared link to routing iteration 2, after the chapter's three steps
    app.run()
    assert not app.exception, app.exception
    table = next(m.value for m in app.markdown if m.value.startswith("| primary capsule |"))
    model, _ = load_checkpoint(app.folder / "tiny-capsnet.safetensors")
    image = load_split("mnist", "test").images[0].numpy().astype(np.float32) / 255.0
    tour = capsnet_tour(model, image)
    W = tour.winner
    header, _, *rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()]
    shown = [float(row[header.index(f"c to {W}")]) for row in rows]
    np.testing.assert_allclose(shown, tour.c[1][tour.shown, W], atol=5e-4)  # three decimals
    assert "Measured here" in app.info[0].value and f"uniform {0.1:.3f}" in app.info[0].value


def test_the_matrix_tour_walks_every_step(app):
    app.run()
    app.sidebar.selectbox(key="model_pick").set_value("tiny-matrix.safetensors").run()
    assert not app.exception, app.exception
    seen = []
    for _ in range(12):
        assert not app.exception, app.exception
        seen.append(app.get("progress")[0].proto.text)
        if app.button(key="tour_next").disabled:
            break
        assert app.image or app.get("plotly_chart")  # the chapter's votes are a chart
        app.button(key="tour_next").click().run()
    assert [s.split(": ", 1)[1].strip("*") for s in seen] == [
        "Why capsules: votes under a change of viewpoint",
        "Why capsules: coordinate addition",
        "The input",
        "Primary capsules: a pose matrix and an activation",
        "Votes for every class capsule",
        "EM routing, iteration 1 of 2",  # matrix-small routes with 2 EM iterations
        "EM routing, iteration 2 of 2",
        "Class capsules: activations are the answer",
        "Where I stand",
    ]


def test_the_efficient_tour_walks_every_step_with_the_models_numbers(efficient_app):
    from capsviz.analysis import rules
    from capsviz.glossary import help_text

    app = efficient_app
    app.run()
    app.sidebar.selectbox(key="model_pick").set_value("tiny-efficient.safetensors").run()
    assert not app.exception, app.exception
    assert not any("this page needs" in i.value for i in app.info)  # the model itself, no stand-in
    model, _ = load_checkpoint(app.folder / "tiny-efficient.safetensors")
    tour = efficient_tour(model, load_split("mnist", "test").images[0].numpy().astype(np.float32) / 255.0)
    W = tour.winner
    seen = []
    for step in range(1, 14):
        assert not app.exception, (step, app.exception)
        seen.append(app.get("progress")[0].proto.text)
        k = step - 3  # the tour's own steps come after the chapter's three
        if k < 1 or k == 9:  # the chapter's steps, and where the student stands
            pass
        elif k < 8:
            assert app.image or app.dataframe, f"step {k} has no figure"
            if k in (4, 5):  # the prediction lengths, then the couplings, as tables of text: the tour's numbers, as drawn
                want = tour.pred_len if k == 4 else tour.c
                parts = [f.value for f in app.dataframe]  # ten class columns in two stacked tables of five: a phone shows each whole
                assert [list(p.columns) for p in parts] == [[str(j) for j in range(5)], [str(j) for j in range(5, 10)]]
                shown = pd.concat(parts, axis=1).to_numpy()
                np.testing.assert_allclose(shown, want, atol=0.005 + 1e-9)
                assert (shown == np.round(want.astype(float), 2)).all()
        else:
            assert "has not measured this model yet" in app.info[0].value
            assert "self-attention set each" in " ".join(m.value for m in app.markdown)
        if k == 5:  # routing: the couplings shown are routing's own, and what is said of them holds
            text = next(m.value for m in app.markdown if m.value.startswith("| primary capsule |"))
            header, _, *rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()]
            np.testing.assert_allclose([float(r[header.index(f"c to {W}")]) for r in rows], tour.c[:, W], atol=5e-4)
            np.testing.assert_allclose([float(r[header.index(f"b to {W}")]) for r in rows], tour.prior[:, W], atol=5e-4)
            said = app.info[0].value
            assert f"their evenness is {tour.entropy.mean():.1%} (100% = spread evenly over all" in said
            assert (" are near uniform: " in said) == tour.near_uniform and (" are away from uniform" in said) != tour.near_uniform
            assert rules.RULES["near uniform"] in said  # the whole rule, not only the part that decided
            assert "All of it is negative" in said
            assert help_text("self_attention", "c", "prior", "u_hat") in [c.value for c in app.caption]  # the table's symbols
            assert "b_ji (learned prior)" in " ".join(m.value for m in app.markdown)
        if k == 3:
            assert help_text("efficient_squash", "length", "pose") in [c.value for c in app.caption]
        if k == 6:
            assert f"**{W}** with length {tour.lengths[W]:.2f}" in " ".join(m.value for m in app.markdown)
        if app.button(key="tour_next").disabled:
            break
        app.button(key="tour_next").click().run()
    assert [s.split(": ", 1)[1].strip("*") for s in seen] == [
        "Why capsules: invariance against equivariance",
        "Why capsules: parts in the wrong places",
        "Why capsules: pose, not just presence",
        "The input",
        "Four convolutions: local features",
        "Primary capsules: vectors that see the whole image",
        "Predictions u_hat for every class capsule",
        "Self-attention routing, in one pass",
        "Class capsules: lengths are the answer",
        "The decoder redraws the digit",
        "Does routing matter? This model in the routing lab",
        "Where I stand",
    ]


def test_the_routing_page_explains_the_prior_it_shows(efficient_app):
    from capsviz.glossary import help_text

    app = efficient_app
    app.query_params["model"] = "tiny-efficient.safetensors"
    app.switch_page("pages/routing.py").run()
    assert not app.exception, app.exception
    assert app.title[0].value == "Self-attention routing, in one pass"
    assert help_text("self_attention", "c", "prior") in [c.value for c in app.caption]


def test_the_tour_explains_a_cnn(app):
    app.run()
    app.sidebar.selectbox(key="model_pick").set_value("tiny-cnn.safetensors").run()
    assert not app.exception
    assert "is a baseline CNN; this page needs a CapsNet, Efficient-CapsNet or matrix capsules" in app.info[0].value
    assert "so it shows **tiny-capsnet**" in app.info[0].value and not app.exception


def test_the_glossary_page_lists_every_entry_with_the_hover_helps_words_and_finds_one(app):
    from capsviz.glossary import TERMS, entries, help_text

    app.switch_page("pages/glossary.py").run()
    assert not app.exception
    shown = [m.value for m in app.markdown]
    for key in TERMS:
        assert help_text(key) in shown  # the very text of the hover help
    app.text_input(key="term").set_value("coupl").run()
    shown = [m.value for m in app.markdown if m.value.startswith("**")]
    assert shown and len(shown) == len(entries("coupl")) < len(TERMS)
    assert any(s.startswith("**c_ij (coupling)**") for s in shown)
    app.text_input(key="term").set_value("no such word").run()
    assert "No entry mentions" in app.info[0].value


def test_the_tour_links_to_the_glossary(app):
    app.run()
    assert any(link.label.startswith("Glossary") for link in app.get("page_link"))


def test_the_dynamic_playground_routes_by_self_attention_too(app):
    from capsviz.analysis.playground import attention_toy

    app.switch_page("pages/playground.py").run()
    app.selectbox(key="pg_dynamic_preset").set_value("outliers").run()
    app.radio(key="pg_rule").set_value("self-attention").run()
    assert not app.exception, app.exception
    assert app.slider(key="pg_dynamic_T").disabled
    expected = attention_toy(DYNAMIC_PRESETS["outliers"][:, :2])
    np.testing.assert_allclose(table(app, "pg_att_table")["c to 1"], expected.c[0, :, 0], atol=1e-9)
    np.testing.assert_allclose(table(app, "pg_att_table")["a to 1"], expected.b[0, :, 0], atol=1e-9)
    assert app.query_params["rule"] == "self-attention"
    assert "one pass" in app.info[0].value
