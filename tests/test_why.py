"""The "Why capsules" chapter (capsviz.analysis.why, capsviz.viz.why, pages/why.py): the changes
and scrambles do what they say, each rule flips at its threshold, every sentence's verdict is the
one its numbers decide, and every number a sentence quotes is a number its charts draw, on tiny
models everywhere and on every shipped model that applies with the real test set."""

import copy
import io
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest
from synthetic import synthetic_digits
from test_app import APP, app, router_mode  # noqa: F401 - the fixtures: tiny models, router mode

from capsviz.analysis import rules, why
from capsviz.checkpoint import list_checkpoints, load_checkpoint
from capsviz.config import preset
from capsviz.models import build_model
from capsviz.viz import why as figures

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?")


def invariance_charts(sweep: dict, kind: str, amount: float) -> list[dict]:
    """The three charts' specs of the invariance sweep, as the page shows them."""
    return [build.spec(sweep, kind, amount) for build in (figures.changes, figures.stays, figures.capsule)]


def numbers_of(spec: dict) -> list[float]:
    """Every number a chart's spec draws (its traces' y and x values): what its sentences may quote."""
    return [
        float(v) for trace in spec["data"] for axis in ("x", "y") for v in trace.get(axis, []) if isinstance(v, int | float | np.number)
    ]


# --- the changes and the scrambles


def test_a_shift_moves_the_ink_right_and_a_turn_goes_anticlockwise():
    x = torch.zeros(1, 1, 28, 28)
    x[0, 0, 4, 14] = 1.0  # a dot above the centre
    assert why.moved(x, "shift", 3)[0, 0, 4, 17] == 1.0 and why.moved(x, "shift", 3).sum() == 1.0
    assert torch.equal(why.moved(x, "shift", 0), x)
    turned = why.moved(x, "rotate", 90)[0, 0]
    row, col = np.unravel_index(int(turned.argmax()), turned.shape)
    assert abs(row - 14) <= 1 and col < 8  # above the centre, turned anticlockwise: left of it
    assert torch.allclose(why.moved(x.expand(1, 1, 28, 28) * 0 + 0.5, "rotate", 0)[..., 2:-2, 2:-2], torch.full((1, 1, 24, 24), 0.5))
    with pytest.raises(ValueError):
        why.moved(x, "scale", 2)


@pytest.mark.parametrize("scheme", why.SCHEMES)
def test_a_scramble_keeps_every_pixel_and_moves_the_parts(scheme):
    x = torch.arange(28 * 28, dtype=torch.float32).view(1, 1, 28, 28)
    y = why.scrambled(x, scheme)
    assert torch.equal(y.flatten().sort().values, x.flatten().sort().values)  # the same pixels, moved
    assert not torch.equal(y, x)
    if scheme == "halves":
        assert torch.equal(y[..., :14, :], x[..., 14:, :])
    if scheme == "sides":
        assert torch.equal(y[..., :, :14], x[..., :, 14:])
    if scheme == "quadrants":
        assert torch.equal(y[..., :14, 14:], x[..., :14, :14])  # top left moved one place clockwise
        assert torch.equal(y[..., :14, :14], x[..., 14:, :14])  # bottom left moved up


# --- the rules, both sides


def test_the_chapters_rules_flip_at_their_thresholds():
    assert rules.nearly_invariant(rules.NEARLY_INVARIANT - 0.01)
    assert not rules.nearly_invariant(rules.NEARLY_INVARIANT)
    assert rules.dimension_moves(rules.DIM_STEP) and rules.dimension_moves(-rules.DIM_STEP - 0.01)
    assert not rules.dimension_moves(rules.DIM_STEP - 0.001)
    assert rules.answer_stays(1 - rules.NEARLY_INVARIANT + 0.001) and not rules.answer_stays(1 - rules.NEARLY_INVARIANT - 0.001)
    assert rules.follows(rules.FOLLOWS + 0.01) and not rules.follows(rules.FOLLOWS)
    assert rules.moves_together(0.2, 1.0, 1.05)  # the spread stays, the mean moves more than a tenth of it
    assert not rules.moves_together(0.05, 1.0, 1.05)  # the mean barely moves
    assert not rules.moves_together(0.5, 1.0, 1.3)  # the spread grows: the votes scatter
    for name in ("nearly invariant", "dimension moves", "follows the digit", "move together"):
        assert name in rules.RULES


# --- words against charts


def quoted(sentences: list[str]) -> list[str]:
    return [m.group() for s in sentences for m in NUMBER.finditer(s)]


def drawn(text: str, specs: list[dict], allowed=()) -> bool:
    """Whether the number `text` (as a sentence writes it) is a number a chart draws, written to
    the same decimals, or one of `allowed` (counts and constants the sentence names)."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    value = float(text)
    if any(abs(value - a) < 1e-9 for a in allowed):
        return True
    return any(f"{v:.{decimals}f}" == f"{value:.{decimals}f}" for spec in specs for v in numbers_of(spec))


def check_quotes(sentences, specs, allowed) -> None:
    missing = [q for q in quoted(sentences) if not drawn(q, specs, allowed)]
    assert not missing, f"numbers quoted but not drawn: {missing} in {sentences}"


def invariance_quotes_are_drawn(sweep: dict) -> None:
    for kind, values in why.KINDS.items():
        for amount in values:
            words = why.invariance_words(sweep, kind, amount)
            check_quotes(words, invariance_charts(sweep, kind, amount), (sweep["images"], rules.DIM_STEP))


def parts_quotes_are_drawn(sweep: dict) -> None:
    specs = [figures.parts_right.spec(sweep), figures.parts_scores.spec(sweep)]
    for k, scheme in enumerate(why.SCHEMES, start=1):
        n = sweep["both_right"]
        band = rules.noise(sweep["cnn_right"][k], n, sweep["caps_right"][k], n)
        check_quotes(why.parts_words(sweep, scheme), specs, (n, round(band, 1)))


def viewpoint_quotes_are_drawn(sweep: dict) -> None:
    for kind, values in why.KINDS.items():
        for amount in values:
            specs = [build.spec(sweep, kind, amount) for build in (figures.votes_move, figures.coordinates, figures.coordinates_kept)]
            check_quotes(why.viewpoint_words(sweep, kind, amount), specs, (sweep["images"],))


def one_image_quotes_are_drawn(view: dict, kind: str) -> None:
    for amount in view["values"]:
        if amount == 0:
            continue
        words = [why.one_image_words(view, [str(k) for k in range(10)], amount)]
        k, zero = view["values"].index(amount), view["values"].index(0.0)
        moving = int((np.abs(view["vectors"][k] - view["vectors"][zero]) >= rules.DIM_STEP).sum())
        specs = [figures.this_digit.spec(view, kind, amount), figures.dimensions.spec(view, amount)]
        names = (view["capsule"], view["cnn_answer"])  # the classes named (digits' names are numbers)
        check_quotes(words, specs, (moving, view["vectors"].shape[1], rules.DIM_STEP, *names))


# --- tiny models on synthetic digits: every function, every branch


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    caps = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)).eval()
    cnn = build_model(preset("cnn-small")).eval()
    matrix = build_model(preset("matrix-small", in_size=28, num_classes=10, A=8, B=4, C=4, D=4, coord_add=True)).eval()
    images, labels = synthetic_digits(24, 3)
    return caps, cnn, matrix, torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64))


def test_the_invariance_sweep_measures_each_change_against_the_unchanged_digit(models):
    caps, cnn, _, images, _ = models
    sweep = why.invariance_sweep(caps, cnn, images, batch=10)
    assert sweep["images"] == 24
    zero = why.column(sweep, "shift", 0)
    assert zero["cnn_kept"] == 100 and zero["caps_kept"] == 100
    assert zero["cnn_features"] == 0 and zero["caps_vector"] == 0 and zero["caps_dims"] == 0
    for kind, values in why.KINDS.items():
        for f in why.FIELDS:
            assert len(sweep[f"{kind}_{f}"]) == len(values) and np.isfinite(sweep[f"{kind}_{f}"]).all()
    assert max(sweep["shift_cnn_features"]) > 0
    invariance_quotes_are_drawn(sweep)


def test_the_parts_sweep_counts_the_images_both_models_get_right(models):
    caps, cnn, _, images, labels = models
    sweep = why.parts_sweep(caps, cnn, images, labels, batch=10)
    assert 0 <= sweep["both_right"] <= 24 and sweep["images"] == 24
    if sweep["both_right"]:
        assert sweep["cnn_right"][0] == 100 and sweep["caps_right"][0] == 100
        assert all(0 <= a <= 1 + 1e-6 for a in sweep["agreement"])
    parts_quotes_are_drawn(sweep)


def test_agreement_is_one_for_votes_that_point_one_way(models):
    caps = models[0]

    class Same:  # every vote the same vector: the weighted sum is as long as the weighted lengths
        def predictions(self, x):
            return torch.ones(len(x), 10, 5, 16)

        def route(self, u_hat, record):
            return caps.route(u_hat, record=record)

    got = why.vote_agreement(Same(), torch.zeros(2, 1, 28, 28), torch.tensor([0, 3]))
    assert torch.allclose(got, torch.ones(2))


def test_the_viewpoint_sweep_with_and_without_coordinate_addition(models):
    _, _, matrix, images, _ = models
    sweep = why.viewpoint_sweep(matrix, images[:8], batch=4)
    assert sweep["coordinates"] == 1
    k = sweep["shift_values"].index(0.0)
    assert sweep["shift_mean_move"][k] == pytest.approx(0, abs=1e-6) and sweep["shift_kept"][k] == 100
    viewpoint_quotes_are_drawn(sweep)
    votes = why.one_image_votes(matrix, images[0].numpy() / 255.0, "shift", 4)
    assert votes["with"]["before"].shape == votes["without"]["before"].shape
    # what coordinate addition adds: the receptive fields' scaled centres, in the two position entries alone
    V, _, _ = why.class_votes(matrix, torch.zeros(1, 1, 28, 28) + images[:1, None].float() / 255)
    P, _, _ = why.class_votes(matrix, torch.zeros(1, 1, 28, 28) + images[:1, None].float() / 255, coordinates=False)
    added = (V - P)[0]  # (I, J, 16)
    others = [h for h in range(16) if h not in why.POSITION]
    assert added[..., others].abs().max() < 1e-5 and added[..., list(why.POSITION)].abs().max() > 0


def test_one_image_words_quote_the_digits_charts(models):
    caps, cnn, _, images, _ = models
    for kind in why.KINDS:
        view = why.one_image(caps, cnn, images[0].numpy() / 255.0, kind)
        assert view["angles"][view["values"].index(0.0)] == pytest.approx(0, abs=0.1)
        one_image_quotes_are_drawn(view, kind)


def fake_invariance(**at4) -> dict:
    """A sweep whose 4 px shift column holds `at4` (else quiet numbers)."""
    sweep = {"images": 1000}
    for kind, values in why.KINDS.items():
        sweep[f"{kind}_values"] = [float(v) for v in values]
        base = dict(cnn_kept=100.0, cnn_scores=0.0, cnn_features=0.0, caps_kept=100.0, caps_length=0.9, caps_vector=0.0, caps_angle=0.0)
        base |= dict(caps_dims=0.0, follows=0.0)
        for f in why.FIELDS:
            sweep[f"{kind}_{f}"] = [base[f]] * len(values)
    for f, v in at4.items():
        sweep[f"shift_{f}"][-1] = v
    return sweep


@pytest.mark.parametrize(
    "at4,says",
    [
        ({"cnn_features": 9.9}, "Pooling kept its features nearly invariant"),
        ({"cnn_features": 10.0}, "Pooling did not make its features invariant"),
        ({"caps_vector": 9.9}, "nearly invariant, like a pooled feature"),
        ({"caps_vector": 25.0, "caps_length": 0.85}, "what the story calls equivariance"),
        ({"caps_vector": 25.0, "caps_length": 0.79}, "Not what the story says: its length falls"),
        ({"caps_vector": 25.0, "caps_length": 1.0 + 0.01}, "Its length rises by more than a tenth"),
        ({"cnn_features": 50.0, "cnn_kept": 89.9}, "and its answer changes too, on more than a tenth"),
        ({"cnn_features": 50.0, "cnn_kept": 90.1}, "and only the answer stays"),
        ({"caps_vector": 25.0, "caps_kept": 89.9}, "but its answer changes on more than a tenth"),
        ({"follows": 50.1}, "the drawing follows the digit"),
        ({"follows": 50.0}, "the drawing does not follow the digit"),
    ],
)
def test_each_invariance_verdict_is_the_one_its_numbers_decide(at4, says):
    sweep = fake_invariance(**at4)
    words = " ".join(why.invariance_words(sweep, "shift", 4))
    assert says in words
    invariance_quotes_are_drawn(sweep)
    assert why.invariance_words(sweep, "shift", 0) == [why.invariance_words(sweep, "rotate", 0)[0]]  # no change: nothing claimed


@pytest.mark.parametrize(
    "cnn,caps,says",
    [(20.0, 19.0, "within chance"), (20.0, 5.0, "more sensitive"), (5.0, 20.0, "less sensitive")],
)
def test_each_parts_verdict_is_the_one_its_numbers_decide(cnn, caps, says):
    sweep = {"images": 1000, "both_right": 900, "cnn_right": [100.0, cnn, cnn, cnn], "caps_right": [100.0, caps, caps, caps]}
    sweep |= {"cnn_score": [0.99, 0.2, 0.2, 0.2], "caps_length": [0.9, 0.3, 0.3, 0.3], "agreement": [0.5, 0.1, 0.1, 0.1]}
    assert says in " ".join(why.parts_words(sweep, "halves"))
    parts_quotes_are_drawn(sweep)


@pytest.mark.parametrize(
    "plain,says",
    [(0.075, "makes little difference"), (0.05, "follows the position more"), (0.1, "move less than without it")],
)
def test_what_coordinate_addition_adds_is_said_from_its_numbers(plain, says):
    sweep = fake_viewpoint(0.3, 1.0)
    sweep["shift_position_move_plain"] = [plain] * len(why.SHIFTS)
    assert says in " ".join(why.viewpoint_words(sweep, "shift", 4))
    viewpoint_quotes_are_drawn(sweep)


def fake_viewpoint(move: float, s1: float, coordinates: int = 1) -> dict:
    sweep = {"images": 500, "coordinates": coordinates, "same_answer": 99.0}
    for kind, values in why.KINDS.items():
        n = len(values)
        sweep[f"{kind}_values"] = [float(v) for v in values]
        for f, v in dict(mean_move=move, spread_before=1.0, spread_after=s1, kept=98.0, kept_plain=97.0).items():
            sweep[f"{kind}_{f}"] = [v] * n
        sweep[f"{kind}_position_move"] = [0.08] * n
        sweep[f"{kind}_position_move_plain"] = [0.07] * n
    return sweep


@pytest.mark.parametrize(
    "move,s1,says",
    [
        (0.3, 1.05, "The votes move together"),
        (0.3, 0.8, "spread shrinks by more than a tenth, so the change of viewpoint gathers them"),
        (0.3, 1.3, "spread grows by more than a tenth, so the change of viewpoint scatters them"),
        (0.05, 1.0, "barely move"),
    ],
)
def test_each_viewpoint_verdict_is_the_one_its_numbers_decide(move, s1, says):
    sweep = fake_viewpoint(move, s1)
    assert says in " ".join(why.viewpoint_words(sweep, "shift", 4))
    viewpoint_quotes_are_drawn(sweep)
    plain = " ".join(why.viewpoint_words(fake_viewpoint(move, s1, coordinates=0), "shift", 4))
    assert "trained without coordinate addition" in plain


# --- the shipped models on the real test set


def shipped(fits) -> list[str]:
    return sorted(p.name for p, m in list_checkpoints(ROOT / "checkpoints") if not isinstance(m, str) and fits(m))


def _pair(name: str):
    listing = list_checkpoints(ROOT / "checkpoints")
    path = ROOT / "checkpoints" / name
    meta = dict(listing)[path]
    return path, meta, why.baseline_for(meta, listing)


@pytest.mark.parametrize("name", shipped(why.vector_fits))
def test_every_quoted_number_is_drawn_for_every_shipped_capsule_network(real_data, name):
    from capsviz.data import load_split

    path, meta, cnn_path = _pair(name)
    if cnn_path is None:
        pytest.skip(f"no baseline CNN on {meta.image_dataset} is shipped: the chapter offers another model")
    model, _ = load_checkpoint(path)
    cnn, _ = load_checkpoint(cnn_path)
    data = load_split(meta.image_dataset, "test")
    sweep = why.kept_sweep("invariance", path, model.eval(), data, why.WHY_IMAGES, cnn_path, cnn.eval())
    assert sweep["images"] == why.WHY_IMAGES
    invariance_quotes_are_drawn(sweep)
    parts = why.kept_sweep("parts", path, model, data, why.WHY_IMAGES, cnn_path, cnn)
    parts_quotes_are_drawn(parts)
    for kind in why.KINDS:
        one_image_quotes_are_drawn(why.one_image(model, cnn, data.images[0].numpy() / 255.0, kind), kind)


@pytest.mark.parametrize("name", shipped(why.matrix_fits))
def test_every_quoted_number_is_drawn_for_every_shipped_matrix_model(real_data, name):
    from capsviz.data import load_split

    path = ROOT / "checkpoints" / name
    model, meta = load_checkpoint(path)
    data = load_split(meta.image_dataset, "test")
    sweep = why.kept_sweep("viewpoint", path, model.eval(), data)
    viewpoint_quotes_are_drawn(sweep)


# --- the page


@pytest.mark.usefixtures("app")
def test_the_page_shows_every_step_and_its_sentences_come_from_the_core():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"model": "tiny-capsnet.safetensors", "why_change": "rotate", "why_angle": "-20", "why_scheme": "quadrants"})
    at.switch_page("pages/why.py").run()
    assert not at.exception, at.exception
    assert [h.value for h in at.header] == [
        "1. Invariance against equivariance",
        "2. Parts in the wrong places",
        "3. Pose, not just presence: inverse graphics",
        "4. Matrix capsules under a change of viewpoint",
    ]
    assert at.radio(key="why_change").value == "rotate" and at.select_slider(key="why_angle").value == -20
    assert at.radio(key="why_scheme").value == "quadrants"
    text = " ".join(m.value for m in at.markdown)
    assert "Turned -20 degrees, the CNN keeps its answer on" in text
    assert "With the quadrants turned one place clockwise" in text
    assert "the mean of the winning class's votes moves by" in text
    assert len(at.get("plotly_chart")) >= 10
    at.select_slider(key="why_angle").set_value(0).run()
    assert not at.exception
    assert "Pick a shift or a turn other than 0" in " ".join(m.value for m in at.markdown)


@pytest.mark.usefixtures("app")
def test_projector_mode_from_the_link_and_the_switch():
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"model": "tiny-capsnet.safetensors", "projector": "1"})
    at.switch_page("pages/why.py").run()
    assert not at.exception, at.exception
    assert at.toggle(key="projector").value is True and at.query_params["projector"] in ("1", ["1"])
    charts = at.get("plotly_chart")
    spec = charts[0].proto.spec
    assert '"size": 22' in spec or '"size":22' in spec  # the projector's large chart text
    address = [c.value for c in at.code]
    assert address and address[0].startswith("/why?") and "projector=1" in address[0] and "model=tiny-capsnet.safetensors" in address[0]
    at.toggle(key="projector").set_value(False).run()
    assert "projector" not in at.query_params
    assert not at.code


def test_the_qr_code_holds_exactly_the_views_address():
    segno = pytest.importorskip("segno")
    from PIL import Image

    from capsviz.viz.share import local_only, qr_png, reachable, view_address

    address = view_address("http://10.0.0.5:8501/", "why", {"model": ["capsnet-mnist.safetensors"], "why_shift": ["4"], "projector": ["1"]})
    assert address == "http://10.0.0.5:8501/why?model=capsnet-mnist.safetensors&projector=1&why_shift=4"
    assert view_address("http://10.0.0.5:8501/why", "why", {}) == "http://10.0.0.5:8501/why"
    assert not local_only(address) and local_only("http://localhost:8501/why") and local_only("/why?x=1")
    # the teacher's browser on the server itself: the machine's network address, where the server listens on it
    here = "http://127.0.0.1:8501/why?projector=1"
    assert reachable(here, "", "10.0.0.5") == reachable(here, "0.0.0.0", "10.0.0.5") == "http://10.0.0.5:8501/why?projector=1"
    assert reachable(here, "127.0.0.1", "10.0.0.5") == here  # listening on this computer alone: no phone reaches it
    assert reachable(here, "", None) == reachable(here, "", "127.0.0.1") == here and reachable(address, "", "10.9.9.9") == address
    assert reachable("http://localhost/why", "::", "fd00::5") == "http://[fd00::5]/why"
    scale, border = 6, 2
    img = np.asarray(Image.open(io.BytesIO(qr_png(address, scale=scale))).convert("L"))
    want = np.array([[bool(m) for m in row] for row in segno.make(address, error="m", micro=False).matrix])
    n = len(want)
    assert img.shape == ((n + 2 * border) * scale,) * 2
    centres = img[border * scale + scale // 2 :: scale, border * scale + scale // 2 :: scale][:n, :n]
    assert np.array_equal(centres < 128, want)  # every module of the picture is the address's code


def test_the_sweeps_kept_on_disk_are_read_again(tmp_path, monkeypatch, models):
    """A sweep runs once per model file and settings; a second ask reads it from disk."""
    caps, cnn, _, images, labels = models
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    from capsviz import checkpoint as ckpt
    from capsviz.data.mnist import ImageSet

    path, cnn_path = tmp_path / "caps.safetensors", tmp_path / "cnn.safetensors"
    ckpt.save_checkpoint(path, caps, {"dataset": "mnist"})
    ckpt.save_checkpoint(cnn_path, cnn, {"dataset": "mnist"})
    data = ImageSet("mnist", "test", images[:6], labels[:6], "synthetic")
    first = why.kept_sweep("parts", path, caps, data, 6, cnn_path, cnn)
    calls = []
    monkeypatch.setattr(why, "parts_sweep", lambda *a, **k: calls.append(1) or copy.deepcopy(first))
    assert why.kept_sweep("parts", path, caps, data, 6, cnn_path, cnn) == first and not calls


def test_every_word_of_the_chapter_has_its_glossary_entry():
    from capsviz import glossary

    for _, word in why.chapter_words():
        assert glossary.lookup(word), word


def test_the_stored_sweeps_of_the_shipped_models_are_said_without_the_data():
    """`python -m capsviz.analysis.why --say`: the shipped sweeps read and put into words, no test set needed."""
    lines = why.stored_sentences(ROOT / "checkpoints")
    heads = [line for line in lines if line.startswith("== ")]
    assert "== capsnet-mnist (invariance, 1000 test images)" in heads and "== matrix-small-mnist (viewpoint, 1000 test images)" in heads
    assert len(heads) == len(shipped(why.vector_fits)) * 2 - 2 + len(shipped(why.matrix_fits))  # fashion-mnist has no CNN beside it


# --- the page in Chinese and Japanese (issue 49)

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


def _why_page(lang: str | None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"model": "tiny-capsnet.safetensors", "why_change": "rotate", "why_angle": "-20", "why_scheme": "quadrants"})
    if lang:
        at.query_params["lang"] = lang
    at.switch_page("pages/why.py").run()
    assert not at.exception, (lang, at.exception)
    return at


def _said(at: AppTest, opening: str) -> str:
    """The markdown block (the sentences `say` writes together) that starts with `opening`."""
    return next(m.value for m in at.markdown if m.value.startswith(opening))


@pytest.mark.usefixtures("app")
@pytest.mark.parametrize(
    ("lang", "header", "invariance", "parts", "viewpoint"),
    [
        ("zh-Hans", "1. 不变性与同变性", "旋转 -20 度后，CNN 在", "四个象限顺时针各移一格后，", "旋转 -20 度后，获胜类别的投票"),
        (
            "ja",
            "1. 不変性と同変性",
            "-20 度回転させると、CNN は",
            "「四つの象限を時計回りに一つずらす」では、",
            "-20 度回転させると、勝ったクラスへの投票",
        ),
    ],
    ids=["zh-Hans", "ja"],
)
def test_the_page_in_chinese_and_japanese_quotes_the_numbers_it_quotes_in_english(lang, header, invariance, parts, viewpoint):
    from test_i18n import english_left

    english = _why_page(None)
    at = _why_page(lang)
    assert at.title[0].value != english.title[0].value and _CJK.search(at.title[0].value)
    assert at.header[0].value == header and all(_CJK.search(h.value) for h in at.header)
    for en, said in (
        ("Turned -20 degrees, the CNN keeps its answer on", invariance),
        ("With the quadrants turned one place clockwise", parts),
        ("Turned -20 degrees, the mean of the winning class's votes", viewpoint),
    ):
        mine, theirs = _said(at, said), _said(english, en)
        # the same numbers, each as often, in the order the language puts them
        assert sorted(NUMBER.findall(mine)) == sorted(NUMBER.findall(theirs)), (lang, mine, theirs)
    text = "\n".join([*(m.value for m in at.markdown), *(h.value for h in at.header)])
    assert not english_left(text), english_left(text)
