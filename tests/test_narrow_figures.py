"""The figures that a page lays out piece by piece so that a phone's narrow screen keeps each piece
readable (tests/e2e/test_narrow_browser.py measures them in a browser): EM's histograms one image
per class capsule, MultiMNIST's couplings one image per input, the grouped bars' long names, and
the playgrounds' figures one picture per upper capsule and one of the share bars, the explorer's
perturbation grid and MultiMNIST's coupling blocks with text a phone shows readably, and the lab's
table columns as wide as their longest cell (tests/e2e/test_lang_narrow_browser.py measures them on
a phone)."""

import numpy as np
import pytest
import torch
from PIL import ImageDraw

from capsviz.analysis import STEPS
from capsviz.analysis.explain import panel_order, zoom_limit
from capsviz.analysis.playground import DYNAMIC_PRESETS, EM_PRESETS, attention_toy, dynamic_toy, em_toy
from capsviz.analysis.routing import em_trace, vote_histograms
from capsviz.i18n import speaking
from capsviz.i18n import t as say
from capsviz.viz import grouped_bars
from capsviz.viz.animation import dynamic_frames, dynamic_toy_pieces, em_frames, em_toy_pieces
from capsviz.viz.explain import (
    COUPLING_TEXT,
    GRID_TEXT,
    PANEL_WIDTH,
    WINNER,
    coupling_block,
    coupling_overlays,
    em_histogram_frames,
    em_histograms,
    labelled_grid,
)
from capsviz.viz.teach import CELL_PADDING, PANEL, SMALL, column_width, whole

IMAGE = np.random.default_rng(1).random((28, 28)).astype(np.float32)


def red(img) -> int:
    return int((np.asarray(img.convert("RGB")) == WINNER).all(-1).sum())


def test_em_histograms_are_the_frames_panels_one_image_each(matrix):
    with torch.no_grad():
        tr = em_trace(matrix, IMAGE, 3)
    limit = zoom_limit(tr.distances, False).limit
    names = [str(k) for k in range(10)]
    for t in range(3):
        title, panels = em_histograms(tr, limit, names, t)
        counts = vote_histograms(tr, np.linspace(0, limit, 41))
        assert title.startswith(f"EM iteration {t + 1} of 3: R-weighted vote distances per class capsule, distances 0 to {limit:g}")
        assert title.endswith(f"same height scale in every panel, top = {float(counts.max()):.3g}")  # one scale over the iterations
        assert len(panels) == 10 and {p.width for p in panels} == {PANEL_WIDTH}
        assert red(panels[0]) > 100 and all(red(p) == 0 for p in panels[1:])  # the winner (first) in red, alone
        frame = em_histogram_frames(tr, limit, names, t)[0]
        assert red(frame) > 100  # the slides' frame keeps the winner in red too
    # the panels in the frames' order: by final activation, the winner first
    assert panel_order(tr.a[-1])[0] == int(tr.a[-1].argmax())


def test_a_coupling_block_is_its_block_of_the_whole_figure():
    image = np.zeros((36, 36), np.float32)
    maps = np.full((2, 2, 3, 6, 6), 0.1)
    maps[1, 0, 2] = 0.2  # the second input, first capsule, last iteration: at the top of the scale
    whole = np.asarray(coupling_overlays([image, image], maps, ["pair", "alone"], ["to 7", "to 2"], 0.1, 0.2, "t", scale=4))
    block = coupling_block(image, maps[1], "alone", ["coupling c\nto capsule 7", "to 2"], 0.1, 0.2, scale=3)
    assert block.width == 3 * (108 + 6) - 6 + 8 <= PHONE  # its tiles' width: a phone shows it at its drawn size
    px = np.asarray(block)
    red_rows = np.flatnonzero((px == (255, 0, 0)).all(-1).any(1))
    top, bottom = red_rows[0], red_rows[-1]
    assert bottom - top + 1 == 108  # one tile red: the first row's last iteration
    assert (px[top - 24 : top - 4, 4:200] != 255).any()  # its row's name on the line above it, in one line
    assert (px[:, : 4 + 2 * 114][top : bottom + 1] == (0, 0, 0)).all(-1).sum() > 0  # its row's other tiles: no red
    assert tuple(whole[82 + 72, 110 + (3 * 152 + 24) + 2 * 152 + 72]) == (255, 0, 0)  # the same tile in the whole figure


def test_grouped_bars_keep_long_names_whole_and_the_legend_off_the_bars():
    fig = grouped_bars(["capsnet-one-iteration-mnist", "b"], {"dynamic": [1.0, 2.0], "uniform": [None, 3.0]}, "t", "%")
    assert fig.layout.xaxis.tickangle == -45 and fig.layout.xaxis.automargin
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y >= 1  # above the bars: a phone's chart keeps its width
    assert fig.layout.title.yanchor == "top" and fig.layout.margin.t >= 100  # the title above the legend, not under it
    assert list(fig.data[0].x) == ["capsnet-one-iteration-mnist", "b"]


PHONE = 358  # px: the page's column on a 390 px phone (Streamlit's 16 px padding each side)
READABLE = 11  # px: the smallest text a phone shows readably


@pytest.mark.parametrize("lang", ["en", "zh-Hans", "ja"])
@pytest.mark.parametrize("kind", ["dynamic 2", "dynamic 3", "attention", "em 2", "em 3"])
def test_a_playground_figure_comes_in_pieces_a_phone_shows_readably(monkeypatch, kind, lang):
    """Each upper capsule's picture and the share bars are pictures of their own, narrow enough that
    a phone's column shows their smallest text (SMALL px) at READABLE px or more; the whole figure
    for slides is made of the same pieces."""
    sizes: dict[int, list[int]] = {}
    text = ImageDraw.ImageDraw.text

    def recording(self, xy, words, fill=None, font=None, *args, **kwargs):
        sizes.setdefault(id(self.im), []).append(font.size)
        return text(self, xy, words, fill, font, *args, **kwargs)

    monkeypatch.setattr(ImageDraw.ImageDraw, "text", recording)
    with speaking(lang):
        names = [say("lower {i}", i=i + 1) for i in range(6)]
        family, J = kind.split()[0], int(kind.split()[-1]) if kind[-1].isdigit() else 3
        if family == "em":
            toy = em_toy(EM_PRESETS["two clusters"][0][:, :J], EM_PRESETS["two clusters"][1], 3)
            pieces, frame = em_toy_pieces(toy, names, 2), em_frames(toy, names, only=2)[0]
        else:
            toy = (
                attention_toy(DYNAMIC_PRESETS["noise"][:, :3])
                if family == "attention"
                else dynamic_toy(DYNAMIC_PRESETS["outliers"][:, :J], 3)
            )
            it = toy.iterations - 1
            pieces, frame = dynamic_toy_pieces(toy, names, it), dynamic_frames(toy, names, only=it)[0]
        assert np.array_equal(np.asarray(whole(pieces)), np.asarray(frame))  # the slides' figure is these pieces
    assert len(pieces.uppers) == J and {u.size for u in pieces.uppers} == {pieces.uppers[0].size}  # side by side, aligned
    assert pieces.uppers[0].width == PANEL + 1 and pieces.title and pieces.key and pieces.note
    for picture in [*pieces.uppers, pieces.bars]:
        drawn = sizes[id(picture.im)]
        assert drawn and min(drawn) >= SMALL, drawn  # its names and numbers
        shown = min(1.0, PHONE / picture.width)  # st.image makes a picture wider than its column smaller
        assert SMALL * shown >= READABLE, f"{picture.width} px wide: its text shows at {SMALL * shown:.1f} px"


def drawn_sizes(monkeypatch) -> dict[int, list[tuple[int, tuple]]]:
    """The font size and box of every text drawn from now on, per picture."""
    sizes: dict[int, list[tuple[int, tuple]]] = {}
    text = ImageDraw.ImageDraw.text

    def recording(self, xy, words, fill=None, font=None, *args, **kwargs):
        sizes.setdefault(id(self.im), []).append((font.size, self.textbbox(xy, words, font=font)))
        return text(self, xy, words, fill, font, *args, **kwargs)

    monkeypatch.setattr(ImageDraw.ImageDraw, "text", recording)
    return sizes


@pytest.mark.parametrize("lang", ["en", "zh-Hans", "ja"])
def test_the_perturbation_grid_reads_on_a_phone(monkeypatch, lang):
    """The explorer's grid (16 dimensions x 11 offsets of 28 px digits at scale 2): every name drawn
    at GRID_TEXT px, which a phone's column showing the whole grid shows at READABLE px or more; the
    offsets' names apart from each other, each over its own column, and inside the picture."""
    sizes = drawn_sizes(monkeypatch)
    grid = np.zeros((16, 11, 28, 28), np.float32)
    grid[3, 5] = 1.0
    columns = [f"{s:+.2f}" if s else "0" for s in STEPS]
    with speaking(lang):
        img = labelled_grid(grid, [f"d{d}" for d in range(16)], columns, scale=2)
        titled = labelled_grid(
            grid, [f"d{d}" for d in range(16)], columns, scale=2, title=say("Perturbation grid for capsule {name} (Fig. 4)", name="7")
        )
    drawn = sizes[id(img.im)]
    assert len(drawn) == 16 + 11 and {size for size, _ in drawn} == {GRID_TEXT}
    assert GRID_TEXT * min(1.0, PHONE / img.width) >= READABLE, img.width
    assert img.height < titled.height and img.width == titled.width  # the download names itself; the page's picture does not
    left = img.width - 6 - 11 * 58
    heads = [box for _, box in drawn[:11]]
    for c, (x0, _, x1, _) in enumerate(heads):
        assert 0 <= x0 and x1 <= img.width and x0 <= left + c * 58 + 56 and x1 >= left + c * 58  # over its own column
    for a, b in zip(heads, heads[1:], strict=False):
        assert a[2] <= b[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)  # apart: side by side or on another line
    px = np.asarray(img.convert("L"))
    top = max(box[3] for box in heads) + 4
    assert px[top + 3 * 58 + 28, left + 5 * 58 + 28] == 255 and px[top + 3 * 58 + 28, left + 6 * 58 + 28] == 0  # tile (d3, 0) lit


@pytest.mark.parametrize("lang", ["en", "zh-Hans", "ja"])
def test_a_coupling_block_reads_on_a_phone(monkeypatch, lang):
    """MultiMNIST's coupling block (36 px inputs at scale 3): no word under COUPLING_TEXT px and the
    block no wider than a phone's column, so each shows at READABLE px or more."""
    sizes = drawn_sizes(monkeypatch)
    maps = np.random.default_rng(0).random((2, 3, 6, 6))
    with speaking(lang):
        rows = [say("coupling c\nto capsule {capsule}", capsule=k) for k in (3, 7)]
        block = coupling_block(np.zeros((36, 36)), maps, say("the pair ({labels})", labels="3, 7"), rows, 0.1, 0.3)
    drawn = sizes[id(block.im)]
    assert min(size for size, _ in drawn) >= COUPLING_TEXT >= READABLE and block.width <= PHONE
    assert all(box[2] <= block.width for _, box in drawn), drawn  # every word inside the picture


def test_a_table_column_is_as_wide_as_its_longest_cell():
    """The lab's text columns: never under the width asked for, and wide enough for the longest
    name or Chinese or Japanese word (a character is about the font's size) with the cell's padding."""
    assert column_width(["a"], 100) == 100
    long = column_width(["capsnet-one-iteration-multimnist", "b"], 100)
    assert long > column_width(["capsnet-one-iteration-mnist"], 100) > 150 + CELL_PADDING
    assert column_width(["動的ルーティング"], 0) >= 8 * 13 + CELL_PADDING


def test_a_table_column_measures_latin_in_the_grids_own_font():
    """Given the grid's font file (Streamlit's Source Sans), Latin letters are measured in it, at
    its regular weight, and Chinese or Japanese still in Noto Sans CJK: one em a character."""
    from pathlib import Path

    import streamlit

    source = next((Path(streamlit.__file__).parent / "static" / "static" / "media").glob("SourceSansVF-Upright*"), None)
    if source is None:
        pytest.skip("this Streamlit has no Source Sans file")
    name = "capsnet-one-iteration-mnist"
    assert column_width([name], 0, latin=source) < column_width([name], 0)  # Noto Sans CJK's Latin is wider
    assert column_width([name], 0, latin=source) - CELL_PADDING - 2 == pytest.approx(152, abs=2)  # what chromium draws it in
    word = "動的ルーティング"
    assert column_width([word], 0, latin=source) == column_width([word], 0) >= 8 * 13 + CELL_PADDING
