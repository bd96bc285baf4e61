"""AppTest of the EM, MultiMNIST and explorer pages' words and figures (issue 24) over test_app's
tiny checkpoints and synthetic data."""

import numpy as np
import test_app
import torch

from capsviz.analysis import rules
from capsviz.analysis.explain import (
    capsule_role,
    conv_assignment_words,
    distance_words,
    em_share_words,
    em_shares,
    pair_routing,
    pair_routing_title,
    pair_routing_words,
    position_words,
    verdict_words,
    zoom_limit,
)
from capsviz.analysis.multimnist import compose_pair, intro_words, segment, segment_words
from capsviz.analysis.routing import em_trace
from capsviz.checkpoint import load_checkpoint
from capsviz.data import load_split

# test_app's fixtures: tiny checkpoints and synthetic data (app), app.py's router in charge (autouse)
app = test_app.app
router_mode = test_app.router_mode


def texts(app) -> str:
    return "\n".join([m.value for m in app.markdown] + [c.value for c in app.caption] + [i.value for i in app.info])


def test_em_page_states_the_zoom_it_draws_and_names_every_symbol(app):
    app.run().sidebar.selectbox(key="model_pick").set_value("tiny-matrix.safetensors").run()
    app.switch_page("pages/em.py").run()
    assert not app.exception, app.exception
    model, meta = load_checkpoint(app.folder / "tiny-matrix.safetensors")
    image = load_split("mnist", "test").images[0].numpy().astype(np.float32) / 255.0
    with torch.no_grad():
        tr = em_trace(model, image, meta.config.routing_iterations)
    for zoom in (False, True):
        app.toggle(key="zoom").set_value(zoom).run()
        assert not app.exception, app.exception
        z = zoom_limit(tr.distances, zoom)
        assert f"**Shown: vote distances from 0 to {z.limit:g}**: {z.why}." in texts(app)
    # the small multiples, one image per class; PNG and GIF downloads beside them
    assert [b.label for b in app.get("download_button")] == ["Download this iteration (PNG)", "Download all 2 iterations (animated GIF)"]
    assert any(i.proto.imgs and i.proto.imgs[0].url for i in app.image)
    assert f"the winner, class {int(tr.a[-1].argmax())}, is the first panel (red)" in texts(app)
    sh = em_shares(tr)  # the page's words quote the numbers em_shares gives, with the rule's verb
    label = str(int(load_split("mnist", "test").labels[0]))  # the first test image, a known label
    digits = [str(k) for k in range(10)]
    assert em_share_words(sh, str(sh.winner), meta.config.routing_iterations, label, digits) in texts(app)
    verdict = verdict_words(str(sh.winner), label, digits)
    assert verdict.startswith("right" if sh.winner == int(label) else "wrong")
    assert f"input, prediction {sh.winner} ({verdict})" in [c for i in app.image for c in i.captions]
    assert distance_words(tr) in texts(app)
    assert f"{rules.path_trend(sh.share, '{:.1%}')}: 10.0% at iteration 1 (uniform: 10.0%)" in texts(app)
    assert "can differ" not in texts(app)
    app.slider(key="iterations").set_value(1).run()  # one iteration: nothing re-assigned, and not how the model was trained
    assert not app.exception, app.exception
    assert "stays at the uniform 10.0%, since one iteration re-assigns nothing" in texts(app)
    assert "trained with 2 EM iterations; with 1 its answers can differ" in texts(app)
    app.slider(key="iterations").set_value(2).run()
    # every symbol with its word
    assert app.metric[0].label == "lambda (inverse temperature)" and "Sharpens the activations" in app.metric[0].proto.help
    charts = [c.proto.spec for c in app.get("plotly_chart")]
    assert any("R_ij (assignment)" in s for s in charts) and any("a_j (activation)" in s for s in charts)
    assert any("sigma_j (spread)" in s for s in charts) and any("sum_i R_ij (total assignment)" in s for s in charts)
    # positions in words
    app.slider(key="position").set_value(0).run()
    n = int(round(tr.layers["convcaps1"].R.shape[2] ** 0.5))
    assert f"Position 0 is {position_words(0, n)}." in texts(app)
    # the position is said under the chart, whose title stays short enough for a phone
    assert f"The assignments R at {position_words(0, n)}, one column per lower capsule" in texts(app)
    # the caption says what the map draws, from the layer's numbers at the iteration shown (the last)
    res = tr.layers["convcaps1"]
    t = min(tr.R.shape[0], res.R.shape[0]) - 1
    assert conv_assignment_words(res.R[t, 0].numpy(), 0, t) in texts(app)
    app.slider(key="iterations").set_value(1).run()
    one = em_trace(model, image, 1).layers["convcaps1"].R[0, 0].numpy()
    assert conv_assignment_words(one, 0, 0) in texts(app) and "Every cell here is" in texts(app)
    assert "border" not in conv_assignment_words(one, 0, 0)
    assert any("convcaps1, position 0: assignments R" in s for s in [c.proto.spec for c in app.get("plotly_chart")])
    assert "row-major" not in texts(app) and all("row-major" not in s.label for s in app.slider)


def test_multimnist_page_says_labels_in_words_and_measures_routing(app):
    app.run().sidebar.selectbox(key="model_pick").set_value("tiny-multimnist.safetensors").run()
    app.switch_page("pages/multimnist.py").run()
    assert not app.exception, app.exception
    vals = [int(v) for v in app.query_params["pair"].split(",")]
    data = load_split("multimnist", "test")
    pair = compose_pair(data.images, data.labels, vals[0], vals[1], [vals[2:4], vals[4:6]])
    l1, l2 = pair.labels
    captions = [c for i in app.image for c in i.captions]
    assert f"input: labels {l1} and {l2}" in captions
    assert not any("L:(" in c or "R:(" in c or "*" in c for c in captions)
    red = next(s for s in app.selectbox if s.label.startswith("Red"))
    assert all(o.split(" ", 1)[1].startswith("(") for o in red.options)  # every capsule says what it is
    neither = next(
        j for j in range(10) if j not in (l1, l2, *segment(load_checkpoint(app.folder / "tiny-multimnist.safetensors")[0], pair.image).top2)
    )
    red.set_value(neither).run()
    captions = [c for i in app.image for c in i.captions]
    assert any(c.startswith(f"red: capsule {neither} (neither a label nor predicted), green: capsule ") for c in captions)
    # issue 50: the intro states the paper's aim; the caption under the segmentation measures it
    assert intro_words(36, 4) in [m.value for m in app.markdown]
    green = next(s for s in app.selectbox if s.label.startswith("Green")).value
    tiny = load_checkpoint(app.folder / "tiny-multimnist.safetensors")[0]
    top2 = segment(tiny, pair.image).top2
    chosen = segment(tiny, pair.image, (neither, green))
    mark = f"{green} ({capsule_role(green, (l1, l2), top2)})"
    said = segment_words(chosen.segments, f"{neither} (neither a label nor predicted)", mark, pair.parts)
    assert said in [c.value for c in app.caption]
    # where routing matters: the words are pair_routing's numbers
    model, meta = load_checkpoint(app.folder / "tiny-multimnist.safetensors")
    seg = segment(model, pair.image)
    T = meta.config.routing_iterations
    want = pair_routing_words(pair_routing(model, pair.image, pair.parts[0], seg.top2, T), f"the {l1}")
    assert want in [i.value for i in app.info]
    app.radio(key="mm_alone").set_value("second digit").run()
    assert not app.exception, app.exception
    want = pair_routing_words(pair_routing(model, pair.image, pair.parts[1], seg.top2, T), f"the {l2}")
    assert want in [i.value for i in app.info]
    assert "Download this figure (PNG)" in [b.label for b in app.get("download_button")]
    assert f"**{pair_routing_title(seg.top2, meta.config)}**" in [m.value for m in app.markdown]


def test_explorer_grid_is_labelled_and_terms_have_words(app):
    app.switch_page("pages/explorer.py").run()
    assert not app.exception, app.exception
    grid = next(i for i in app.image if i.captions and i.captions[0].startswith("16 dimensions (rows) x 11 offsets"))
    assert grid.proto.imgs[0].url
    assert "Download grid as PNG" in [b.label for b in app.get("download_button")]
    capsule = next(s for s in app.selectbox if s.label == "Capsule to decode")
    assert "|v_j| (presence)" in capsule.help and "**reconstruction**" in capsule.help
    perturb = next(s for s in app.subheader if s.value == "Perturb one dimension at a time")
    assert "d0..d15 (dimension)" in perturb.proto.help
    assert '"text":"|v_j| (presence)"' in app.get("plotly_chart")[0].proto.spec
    assert any(
        "d0 at the top to d15 at the bottom" in c.value and "-0.25 at the left to +0.25 at the right" in c.value for c in app.caption
    )
    # issue 50: no promise that a dimension shows what it encodes; the bars' caption names what is measured
    from capsviz.analysis.explain import EXPLORER_INTRO

    assert EXPLORER_INTRO in [m.value for m in app.markdown]
    assert any("the dimensions that change the drawing most are d" in c.value for c in app.caption)
