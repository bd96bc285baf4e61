"""The views a student on a phone could not read (second student walk, items 29-30, N9, N10), on the
shipped models at a phone's width (390 px) and a laptop's (1280 px): each figure's panels are drawn
at a readable size, every title and axis label whole, every table column in view or reachable with
the numbers in it as text."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from playwright.sync_api import expect
from st_helpers import new_page, titles_cut_off, wait_for_app_run
from test_browser import no_exceptions, shot

from capsviz.checkpoint import load_checkpoint
from capsviz.data import load_split
from capsviz.viz.explain import PANEL_WIDTH

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
WIDTHS = [390, 1280]


def open_view(browser, url: str, width: int):
    ctx = browser.new_context(viewport={"width": width, "height": 2400})
    page = new_page(ctx, 180_000)
    page.goto(url)
    wait_for_app_run(page, 180_000)
    return ctx, page


def cut_off(page) -> list[str]:
    """Every chart's titles and axis titles that reach outside their chart."""
    charts = page.get_by_test_id("stPlotlyChart")
    return [line for k in range(charts.count()) for line in titles_cut_off(charts.nth(k))]


def inside(box: dict, frame: dict) -> bool:
    return frame["x"] - 1 <= box["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"] + 1


def drawn_size(chart) -> dict:
    """A plotly heatmap as drawn: pixels per cell across and down, its z's shape and its annotations."""
    return chart.locator(".js-plotly-plot").evaluate(
        """p => {
            const x = p._fullLayout.xaxis, y = p._fullLayout.yaxis, z = p._fullData[0].z;
            return {across: x._length / Math.abs(x.range[1] - x.range[0]), down: y._length / Math.abs(y.range[1] - y.range[0]),
                    rows: z.length, columns: z[0].length, first: Array.from(z[0], v => v === null || Number.isNaN(v) ? null : v)};
        }"""
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_coupling_maps_are_readable(browser, shipped_server, shots, width):
    """/routing: the ten "Iteration N: couplings c" maps, each named above it, each at least 55 px
    wide (about 20 px when they stood in one row at 390 px), every class's name inside the chart."""
    ctx, page = open_view(browser, f"{shipped_server}/routing?model=capsnet-mnist.safetensors&iterations=10", width)
    try:
        chart = page.get_by_test_id("stPlotlyChart").first
        expect(chart.locator(".gtitle")).to_have_text("Iteration 10: couplings c")
        size = drawn_size(chart)
        G = next(k for k, v in enumerate(size["first"]) if v is None)  # the first map's width in cells, up to the first gap
        assert G == 6, size["first"]
        assert abs(size["across"] - size["down"]) < 0.5, size  # square cells
        assert size["across"] >= 9, size  # a cell of the 6x6 grid: at least 9 px a side
        assert G * size["across"] >= 55, f"a class's map is {G * size['across']:.0f} px wide"
        frame = chart.bounding_box()
        names = chart.locator(".annotation-text")
        assert sorted(names.all_text_contents()) == [str(k) for k in range(10)]
        for k in range(names.count()):
            assert inside(names.nth(k).bounding_box(), frame), names.nth(k).text_content()
        assert not cut_off(page), cut_off(page)
        chart.screenshot(path=str(shots / f"narrow_routing_maps_{width}.png"))
        no_exceptions(page)
    finally:
        ctx.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_em_histograms_and_titles_are_readable(browser, shipped_server, shots, width):
    """/em, matrix-small-mnist, one EM iteration: the ten Fig. 2 histogram panels each drawn at
    its own size (not shrunk to fit a row of ten), all inside the screen; no chart title or axis
    label cut off."""
    ctx, page = open_view(browser, f"{shipped_server}/em?model=matrix-small-mnist.safetensors&iterations=1", width)
    try:
        expect(page.get_by_text("EM runs once here")).to_be_visible()
        panels = page.locator(".st-key-em_panels img")
        expect(panels).to_have_count(10)
        expect(page.get_by_text("EM iteration 1 of 1: R-weighted vote distances")).to_be_visible()
        for k in range(10):
            img = panels.nth(k)
            img.scroll_into_view_if_needed()
            natural, drawn = img.evaluate("e => [e.naturalWidth, e.getBoundingClientRect().width]")
            assert natural == PANEL_WIDTH and drawn >= natural - 1, (k, natural, drawn)
            box = img.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (k, box)
        rows = {round(panels.nth(k).bounding_box()["y"]) for k in range(10)}
        assert len(rows) == (5 if width == 390 else 3), rows  # two to a row on a phone, four on a laptop
        assert page.get_by_test_id("stPlotlyChart").count() >= 5
        assert not cut_off(page), cut_off(page)
        page.locator(".st-key-em_panels").screenshot(path=str(shots / f"narrow_em_panels_{width}.png"))
        shot(page, shots, f"narrow_em_{width}")
        no_exceptions(page)
    finally:
        ctx.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_multimnist_couplings_are_readable(browser, shipped_server, shots, width):
    """/multimnist, capsnet-multimnist: the pair's and the single digit's couplings, one block each,
    side by side on a laptop and one under the other on a phone, each drawn at 80% or more of its
    size (its 14 px labels at 11 px or more, its 108 px tiles at 86 px or more)."""
    ctx, page = open_view(browser, f"{shipped_server}/multimnist?model=capsnet-multimnist.safetensors", width)
    try:
        expect(page.get_by_text("Download this figure (PNG)")).to_be_visible()
        blocks = [b for b in page.locator("img").all() if b.evaluate("e => e.naturalWidth") == 344]  # 3 x (108 + 6) - 6 + 8
        assert len(blocks) == 2
        boxes = []
        for img in blocks:
            img.scroll_into_view_if_needed()
            natural, drawn = img.evaluate("e => [e.naturalWidth, e.getBoundingClientRect().width]")
            assert drawn >= 0.8 * natural, (natural, drawn)
            boxes.append(img.bounding_box())
            assert boxes[-1]["x"] + boxes[-1]["width"] <= width
        if width == 390:
            assert boxes[1]["y"] >= boxes[0]["y"] + boxes[0]["height"] - 1  # one under the other
        else:
            assert abs(boxes[1]["y"] - boxes[0]["y"]) < 1 and boxes[1]["x"] > boxes[0]["x"]  # side by side
        assert not cut_off(page), cut_off(page)
        blocks[0].screenshot(path=str(shots / f"narrow_multimnist_couplings_{width}.png"))
        no_exceptions(page)
    finally:
        ctx.close()


def grid_cells(frame) -> tuple[list[str], list[list[str]]]:
    """The column names and rows (cell texts) that a dataframe's grid draws: those in view."""
    grid = frame.locator("table[role=grid]")
    expect(grid.locator("tbody tr").first).to_be_attached()
    heads = grid.locator("th").all_inner_texts()
    return heads, [tr.locator("td").all_inner_texts() for tr in grid.locator("tbody tr").all()]


def scroll_across(frame) -> list[tuple[list[str], list[list[str]]]]:
    """What a dataframe shows from its left edge to its right, a screen at a time."""
    scroller = frame.locator(".dvn-scroller").first
    seen = []
    while True:
        seen.append(grid_cells(frame))
        left, full, visible = scroller.evaluate("e => [e.scrollLeft, e.scrollWidth, e.clientWidth]")
        if left + visible >= full - 1:
            return seen
        scroller.evaluate("e => { e.scrollLeft += e.clientWidth / 2; }")
        frame.page.wait_for_timeout(300)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_lab_table_shows_its_numbers_and_the_bars_their_names(browser, shipped_server, shots, width):
    """/lab, MNIST models: at 1280 px every column of both tables in view (no sideways scrolling),
    at 390 px the model's name, its routing and its error at first sight and, scrolling across, every
    column, the model's name staying in view; the bar charts' model names whole and apart."""
    ctx, page = open_view(browser, f"{shipped_server}/lab?model=capsnet-small-mnist.safetensors", width)
    try:
        expect(page.get_by_text("Does routing matter? The short answer")).to_be_visible()
        wait_for_app_run(page)
        fgsm = "FGSM 0.1 %"
        want = [
            ["model", "run with", "error %", "± chance", "shifted %", fgsm, "trained with"],  # no pair %: no MultiMNIST row
            ["model", "run with", "entropy %", "c to pred.", "ms / image", "ms range"],
        ]
        for k, columns in enumerate(want):
            frame = page.get_by_test_id("stDataFrame").nth(k)
            frame.scroll_into_view_if_needed()
            frame.screenshot(path=str(shots / f"narrow_lab_table_{k}_{width}.png"))
            views = scroll_across(frame)
            heads, rows = views[0]
            if width == 1280:
                assert len(views) == 1 and heads == columns, heads  # every column in view at once
            else:
                assert heads[:3] == columns[:3], heads  # a number at first sight, beside its model and routing
                assert all(v[0][0] == "model" for v in views), [v[0] for v in views]  # the model's name stays in view
                assert [c for c in columns if any(c in v[0] for v in views)] == columns
            if k == 0:
                for view_heads, view_rows in views:
                    if "error %" in view_heads:
                        errors = [r[view_heads.index("error %")] for r in view_rows]
                        assert errors and all(float(e) >= 0 for e in errors), errors  # numbers, as text
                if "trained with" in heads:  # whole, not cut: the short label (the long one is its header's help)
                    trained = [r[heads.index("trained with")] for r in rows]
                    assert "dynamic routing, 1 iteration" in trained and all(" (" not in t for t in trained), trained
        charts = page.get_by_test_id("stPlotlyChart")
        for k in range(4):  # error, shifted, FGSM, entropy: one group of bars per model
            chart = charts.nth(k)
            chart.scroll_into_view_if_needed()
            frame = chart.bounding_box()
            ticks = chart.locator(".xtick text")
            names = ticks.all_text_contents()
            assert "capsnet-one-iteration-mnist" in names and not any("…" in n for n in names), names
            boxes = [ticks.nth(j).bounding_box() for j in range(ticks.count())]
            assert all(frame["y"] - 1 <= b["y"] and b["y"] + b["height"] <= frame["y"] + frame["height"] + 1 for b in boxes), boxes
            assert all(inside(b, frame) for b in boxes), boxes
            ends = sorted(b["x"] + b["width"] for b in boxes)  # a slanted name ends at its tick
            assert all(b - a >= 20 for a, b in zip(ends, ends[1:], strict=False)), ends  # slanted names apart
        assert not cut_off(page), cut_off(page)
        shot(page, shots, f"narrow_lab_{width}")
        no_exceptions(page)
    finally:
        ctx.close()


# the predictions step, after the chapter "Why capsules" (three steps; one where it cannot measure the model); long class names too
TOUR_TABLES = [("capsnet-mnist", 7), ("capsnet-fashion-mnist", 5), ("efficient-capsnet-mnist", 7)]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("model, k", TOUR_TABLES, ids=[m for m, _ in TOUR_TABLES])
def test_the_tours_prediction_lengths_are_tables_of_text_a_phone_shows_whole(browser, shipped_server, shots, width, model, k):
    """/tour's predictions step, test image 0: the lengths of the predictions u_hat_j|i are text in tables (not
    only a picture), each equal to the tour's own number, every column in view with no sideways
    scrolling at 390 px too (CapsNet: one row per digit capsule, one column per primary capsule
    followed; Efficient-CapsNet: its ten class columns in two stacked tables), so every number the
    step's "Measured here" quotes is on screen."""
    from capsviz.analysis.tour import tour_of

    path = ROOT / "checkpoints" / f"{model}.safetensors"
    net, meta = load_checkpoint(path)
    image = load_split(meta.image_dataset, "test", ROOT.parent / "shared" / "data").images[0].numpy().astype(np.float32) / 255.0
    with torch.no_grad():
        tour = tour_of(meta.config).follow(net, image)
    want = tour.pred_len.T if meta.config.routing == "dynamic" else tour.pred_len  # as the table lays it out
    ctx, page = open_view(browser, f"{shipped_server}/tour?model={model}.safetensors&step={k}", width)
    try:
        expect(page.get_by_text("Length of the predictions u_hat_j|i for each")).to_be_visible()
        frames = page.get_by_test_id("stDataFrame")
        main = page.get_by_test_id("stMain").bounding_box()
        cells, quoted = {}, page.get_by_test_id("stAlert").filter(has_text="Measured here").first.inner_text()
        column = 0
        for n in range(frames.count()):
            frame = frames.nth(n)
            frame.scroll_into_view_if_needed()
            frame.screenshot(path=str(shots / f"narrow_tour_{model}_{n}_{width}.png"))
            scroller = frame.locator(".dvn-scroller").first
            full, visible = scroller.evaluate("e => [e.scrollWidth, e.clientWidth]")
            assert full <= visible + 1, (n, full, visible)  # nothing to scroll to
            assert inside(frame.bounding_box(), {"x": 0, "width": min(width, main["x"] + main["width"])})
            heads, rows = grid_cells(frame)
            assert len(rows) == want.shape[0]
            for r, row in enumerate(rows):
                assert len(row) == len(heads)  # the row's name and every number in view
                for j, cell in enumerate(row[1:]):
                    cells[r, column + j] = cell
            column += len(heads) - 1
        assert set(cells) == {(r, j) for r in range(want.shape[0]) for j in range(want.shape[1])}
        for (r, j), cell in cells.items():  # the table's number: the tour's, to the two decimals it draws
            assert len(cell.split(".")[-1]) <= 2 and abs(float(cell) - want[r, j]) <= 0.005 + 1e-9, (r, j, cell, want[r, j])
        numbers = re.findall(r"(?<![\d.])\d+\.\d\d(?!\d)", quoted.split("Measured here:")[-1])
        on_screen = {round(float(c), 2) for c in cells.values()}  # the grid's text may drop a trailing 0 ("2.6")
        if meta.config.routing == "dynamic":  # the followed capsules' own lengths |u_i|, in the caption under the table
            under = page.get_by_text("columns: the six primary capsules").first.inner_text()
            on_screen |= {round(float(x), 2) for x in re.findall(r"\|u_i\| = (\d+\.\d+)", under)}
        assert numbers and all(float(x) in on_screen for x in numbers), (numbers, quoted)  # every number it quotes, on screen
        no_exceptions(page)
    finally:
        ctx.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_attack_chart_keeps_its_width_and_its_guessing_label_clear(browser, shipped_server, shots, width):
    """/robustness, Adversarial attacks, capsnet-mnist (its stored FGSM sweep): the legend sits
    above the plot, not beside it (at 390 px it took half the width), the plot spans most of the
    chart, and the "guessing" label touches none of the lines."""
    ctx, page = open_view(browser, f"{shipped_server}/robustness?model=capsnet-mnist.safetensors&tab=Adversarial+attacks", width)
    try:
        chart = page.locator(".st-key-adv_curve")
        expect(chart).to_be_visible(timeout=180_000)
        chart.scroll_into_view_if_needed()
        drawn = chart.locator(".js-plotly-plot").evaluate(
            """p => {
                const L = p._fullLayout, x = L.xaxis, y = L.yaxis, box = p.getBoundingClientRect();
                const lines = p._fullData.map(t => Array.from(t.x, (v, k) => [box.left + x._offset + x.d2p(v), box.top + y._offset + y.d2p(t.y[k])]));
                const legend = p.querySelector('.legend').getBoundingClientRect();
                const label = [...p.querySelectorAll('.annotation')].find(a => a.textContent.trim() === 'guessing').getBoundingClientRect();
                return {plot: {left: box.left + x._offset, width: x._length, top: box.top + y._offset}, chart: box.width,
                        legend: {bottom: legend.bottom, height: legend.height}, label: {left: label.left, right: label.right, top: label.top, bottom: label.bottom}, lines};
            }"""
        )
        assert drawn["plot"]["width"] >= 0.7 * drawn["chart"], drawn  # the lines keep the chart's width, bar the y axis
        assert drawn["legend"]["bottom"] <= drawn["plot"]["top"] + 1, drawn  # the legend above the plot
        lab = drawn["label"]
        for line in drawn["lines"]:  # sample every segment: none may cross the label's box
            for (x0, y0), (x1, y1) in zip(line, line[1:], strict=False):
                for s in np.linspace(0, 1, 50):
                    px, py = x0 + s * (x1 - x0), y0 + s * (y1 - y0)
                    assert not (lab["left"] <= px <= lab["right"] and lab["top"] <= py <= lab["bottom"]), (px, py, lab)
        assert not titles_cut_off(chart), titles_cut_off(chart)  # this chart: the affine tab's are hidden
        chart.screenshot(path=str(shots / f"narrow_attack_chart_{width}.png"))
        no_exceptions(page)
    finally:
        ctx.close()
