"""The words drawn inside the PIL figures (capsviz.viz: the playgrounds, the tour, the EM,
MultiMNIST and explorer figures, the GIF frames) in English, Chinese and Japanese: every text is
in the reader's language, drawn with a font that has each of its characters (no empty boxes),
inside its picture and clear of the others, and quotes the same numbers in every language.

Every call of PIL's `ImageDraw.text` while a figure is built is recorded: its picture's size, the
box the text fills, the text and its font."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from fontTools.ttLib import TTFont
from PIL import ImageDraw
from synthetic import synthetic_digits
from test_i18n import english_left

from capsviz.analysis.playground import DYNAMIC_PRESETS, EM_PRESETS, attention_toy, dynamic_toy, em_toy
from capsviz.analysis.tour import tour_of, walk
from capsviz.config import preset
from capsviz.data.mnist import CLASS_NAMES
from capsviz.glossary import CLASS_WORDS, DIGIT_WORDS
from capsviz.i18n import speaking, t
from capsviz.models import build_model
from capsviz.viz import explain, teach
from capsviz.viz.animation import (
    coupling_frames,
    dynamic_frames,
    em_frames,
    tour_em_frames,
    tour_routing_frames,
    tour_vote_frame,
)

NUMBER = re.compile(r"-?\d+\.\d+")
LANGUAGES = ("en", "zh-Hans", "ja")
WORDY = re.compile(r"[A-Za-z\u3040-\u30ff\u3400-\u9fff]")  # a text with words, not a number alone


@dataclass
class Drawn:
    picture: tuple[int, int, int]  # the picture it is drawn on: its id and size
    box: tuple[float, float, float, float]
    text: str
    font: object


@pytest.fixture
def drawn(monkeypatch) -> list[Drawn]:
    seen: list[Drawn] = []
    text = ImageDraw.ImageDraw.text

    def recording(self, xy, words, fill=None, font=None, *args, **kwargs):
        if words:
            seen.append(Drawn((id(self.im), *self.im.size), self.textbbox(xy, words, font=font), words, font))
        return text(self, xy, words, fill, font, *args, **kwargs)

    monkeypatch.setattr(ImageDraw.ImageDraw, "text", recording)
    return seen


def _tour_models():
    torch.manual_seed(0)
    return {
        "capsnet": build_model(preset("capsnet-small")).eval(),
        "matrix": build_model(preset("matrix-small", in_size=28, num_classes=10, A=8, B=4, C=4, D=4)).eval(),
        "efficient": build_model(
            preset("efficient-capsnet", conv_channels=(8, 16, 16, 32), primary_caps=4, decoder_hidden=(32, 64))
        ).eval(),
    }


MODELS = _tour_models()
IMAGE = synthetic_digits(4, seed=3)[0][0].astype(np.float32) / 255.0


def tour_figures(family: str, names: list[str], words):
    """Each step figure of a family's tour, built as the tour page builds it (pages/tour.py)."""
    model = MODELS[family]
    trace = tour_of(model.config).follow(model, IMAGE)
    for s in walk(trace, names, words, "tiny", names[3], t("the input"), [], model.config):
        d = s.data
        if s.figure == "image":
            yield teach.side_by_side(d["images"], d["labels"])
        elif s.figure == "maps":
            yield teach.feature_maps(d["maps"], d["names"], scale=d.get("scale", 4))
        elif s.figure == "grid":
            yield teach.value_grid(d["values"], d["rows"], d["columns"], d["title"], d.get("highlight"), d.get("highlight_row"))
        elif s.figure == "bars":
            yield teach.bars(d["values"], d["names"], d["highlight"], d["title"], d["axis"], d["lines"])
        elif s.figure == "routing":
            yield tour_routing_frames(trace, names, only=d["t"], capsule=words.capsule)[0]
        elif s.figure == "em_primary":
            yield teach.feature_maps(
                d["maps"], [t("type {k}", k=k + 1) for k in range(len(d["maps"]))], scale=6, columns=4, normalise=False
            )
        elif s.figure == "votes":
            yield tour_vote_frame(trace, names)
        elif s.figure == "em":
            yield tour_em_frames(trace, names, only=d["t"])[0]


def playground_figures():
    """Every frame of the playgrounds' figures, one at a time (as the page draws them)."""
    names = [t("lower {i}", i=i + 1) for i in range(6)]
    votes, a_in = EM_PRESETS["two clusters"]
    toys = [(dynamic_frames, dynamic_toy(DYNAMIC_PRESETS["outliers"][:, :J], 3)) for J in (2, 3)]
    toys += [(em_frames, em_toy(votes[:, :J], a_in, 3)) for J in (2, 3)]
    toys += [(dynamic_frames, attention_toy(DYNAMIC_PRESETS["noise"][:, :3]))]
    toys += [(dynamic_frames, dynamic_toy(np.clip(DYNAMIC_PRESETS["noise"][:, :2] * 1.5, -3, 3), 3))]  # s off the plot
    for frames, toy in toys:
        for it in range(toy.iterations):
            yield frames(toy, names, only=it)[0]


def page_figures(names: list[str]):
    """The EM, MultiMNIST and explorer pages' figures and the routing page's GIF frames, on made-up numbers."""
    rng = np.random.default_rng(0)
    counts = rng.random((len(names), 40))
    title = t("EM iteration {k} of {T}: R-weighted vote distances per class capsule, distances 0 to {limit}", k=1, T=3, limit="2")
    notes = [t("activation {a} · total R {mass}", a=f"{x:.2f}", mass="3.2") for x in rng.random(len(names))]
    yield explain.histogram_panels(counts, 2.0, names, list(range(len(names))), title, notes, 1.0)
    yield explain.histogram_panel(counts[0], 2.0, names[0], [t("activation {a}", a="0.50"), t("total R {mass}", mass="3.2")], 1.0, True)
    image, maps = rng.random((28, 28)), rng.random((2, 2, 3, 6, 6))
    rows = [t("coupling c\nto capsule {capsule}", capsule=names[k]) for k in (3, 7)]
    groups = [t("the pair ({labels})", labels=f"{names[3]}, {names[7]}"), t("{digit} alone", digit=names[3])]
    yield explain.coupling_overlays([image, image], maps, groups, rows, 0.1, 0.3, title)
    yield explain.coupling_block(image, maps[0], groups[0], rows, 0.1, 0.3)
    yield explain.labelled_grid(
        rng.random((4, 11, 28, 28)), [f"d{d}" for d in range(4)], [f"{s:+.2f}" for s in np.linspace(-0.25, 0.25, 11)], title=title
    )
    for it in range(3):
        yield coupling_frames(rng.random((3, len(names), 6, 6)), image, names, only=it, capsule=t("class capsule"))[0]


DIGITS = [str(k) for k in range(10)]
FIGURES = {
    "playground": lambda: playground_figures(),
    "capsnet tour": lambda: tour_figures("capsnet", DIGITS, DIGIT_WORDS),
    "matrix tour": lambda: tour_figures("matrix", DIGITS, DIGIT_WORDS),
    "efficient tour": lambda: tour_figures("efficient", DIGITS, DIGIT_WORDS),
    "pages": lambda: page_figures(DIGITS),
}


def drawing(build, lang: str, drawn: list[Drawn]) -> list[list[Drawn]]:
    """The texts of each figure `build` makes in `lang`, one list per figure."""
    figures = []
    with speaking(lang):
        for _ in build():
            figures.append(list(drawn))
            drawn.clear()
    assert figures
    return figures


def overlap(a, b) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def check_layout(figure: list[Drawn], where: str) -> None:
    """Each text inside its picture; no two texts with words on one picture over each other."""
    for d in figure:
        _, W, H = d.picture
        x0, y0, x1, y1 = d.box
        assert x0 >= -1 and y0 >= -1 and x1 <= W + 1 and y1 <= H + 1, (where, d.text, d.box, d.picture)
    words = [d for d in figure if WORDY.search(d.text)]
    for i, a in enumerate(words):
        for b in words[i + 1 :]:
            assert a.picture != b.picture or not overlap(a.box, b.box), (where, a.text, b.text)


@pytest.mark.parametrize("what", list(FIGURES))
def test_every_figure_speaks_the_readers_language_in_real_glyphs_with_the_same_numbers(what, drawn):
    english = drawing(FIGURES[what], "en", drawn)
    for k, figure in enumerate(english):
        check_layout(figure, f"{what} {k} en")
    for lang in ("zh-Hans", "ja"):
        figures = drawing(FIGURES[what], lang, drawn)
        assert len(figures) == len(english)
        cmap = set(TTFont(teach.export_font(lang)).getBestCmap())
        for k, (figure, en) in enumerate(zip(figures, english, strict=True)):
            where = f"{what} {k} {lang}"
            check_layout(figure, where)
            texts = [d.text for d in figure]
            assert not english_left("\n".join(texts)), (where, english_left("\n".join(texts)))
            assert any(WORDY.search(x) and re.search(r"[\u3040-\u30ff\u3400-\u9fff]", x) for x in texts), where
            for d in figure:  # drawn with the shipped CJK font, which has a glyph for every character
                assert d.font.path == str(teach.export_font(lang)), (where, d.text)
                lacking = {c for c in d.text if not c.isspace() and ord(c) not in cmap}
                assert not lacking, (where, d.text, lacking)
            numbers = sorted(n for x in texts for n in NUMBER.findall(x))
            assert numbers == sorted(n for d in en for n in NUMBER.findall(d.text)), (where, texts)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_long_class_names_stay_inside_the_figures(lang, drawn):
    """Fashion-MNIST's names ("Ankle boot", "T-shirt/top"), as a tour and the pages draw them."""
    names = list(CLASS_NAMES["fashion-mnist"])
    with speaking(lang):
        builds = [tour_figures("capsnet", names, CLASS_WORDS), tour_figures("matrix", names, CLASS_WORDS), page_figures(names)]
        for k, build in enumerate(builds):
            for n, _ in enumerate(build):
                check_layout(list(drawn), f"{k}.{n} {lang}")
                drawn.clear()


def test_a_line_breaks_at_spaces_and_between_cjk_characters_never_before_a_closing_mark():
    with speaking("ja"):
        f = teach.font(12)
        lines = teach.wrap("各棒：一つの下位カプセルの結合係数 c を上位カプセルに分けたもの（合計 1）。", f, 100)
        assert len(lines) > 1 and all(f.getlength(x) <= 100 for x in lines)
        assert "".join(lines).replace(" ", "") == "各棒：一つの下位カプセルの結合係数cを上位カプセルに分けたもの（合計1）。"
        assert not any(x[0] in "、。）：" for x in lines)
    with speaking("en"):
        f = teach.font(12)
        lines = teach.wrap("each bar: one lower capsule's coupling c, split over the upper capsules", f, 120)
        assert " ".join(lines) == "each bar: one lower capsule's coupling c, split over the upper capsules"
        assert all(f.getlength(x) <= 120 for x in lines)
        assert teach.wrap("a\nb", f, 500) == ["a", "b"]
        assert teach.flow(["one", "two", "three"], f, 500) == ["one   two   three"]
        assert teach.flow(["one", "two", "three"], f, f.getlength("one   two")) == ["one   two", "three"]
