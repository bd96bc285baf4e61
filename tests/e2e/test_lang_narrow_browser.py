"""The tour, the explorer and the routing page on a phone (390 px) in Chinese and Japanese, on the
shipped models: no text cut short with an ellipsis, none reaching past the window's right edge, no
chart title outside its chart, and every decimal number the page's sentences quote the same as in
English; the playgrounds' and the tour's routing figures, their pictures one under the other, and
the explorer's perturbation grid and MultiMNIST's coupling blocks, each shown at a size where its
smallest text reads; and the routing lab's and the reproduction page's tables, at 390 and 1280 px,
with no cell cut or broken inside a word. Screenshots (one per screenful) go to E2E_SCREENSHOT_DIR."""

import io
import re

import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import expect
from st_helpers import new_page, titles_cut_off, wait_for_app_run
from test_browser import no_exceptions, shot

from capsviz.viz.explain import COUPLING_TEXT, GRID_TEXT
from capsviz.viz.teach import SMALL

pytestmark = pytest.mark.e2e

WIDTH, HEIGHT = 390, 2400
VIEWS = {
    "tour": "tour?model=capsnet-small-mnist.safetensors",
    "tour-step-4": "tour?model=capsnet-small-mnist.safetensors&step=4",
    "explorer": "explorer?model=capsnet-small-mnist.safetensors&image=7",
    "routing": "routing?model=capsnet-mnist.safetensors&iterations=3",
}
NUMBER = re.compile(r"\d+\.\d+")

# Every text shown with an ellipsis because it does not fit (a widget's label, a select's value, a
# tab, a button), and every text whose box reaches past the window's right edge: [text, why]
CUT = """() => {
  const found = [];
  const main = document.querySelector('[data-testid=stMain]');
  for (const e of main.querySelectorAll('*')) {
    const box = e.getBoundingClientRect();
    const text = (e.innerText || e.textContent || '').trim();
    if (!box.width || !text || e.closest('svg, [data-testid=stDataFrame], [data-testid=stCode]')) continue;
    const style = getComputedStyle(e);
    if (style.textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth + 1) found.push([text.slice(0, 50), 'ellipsis']);
    if (e.children.length === 0 && box.right > window.innerWidth + 1) found.push([text.slice(0, 50), `right edge ${Math.round(box.right)}`]);
  }
  if (main.scrollWidth > window.innerWidth + 1) found.push(['the page', `scrolls sideways: ${main.scrollWidth}`]);
  return found;
}"""

# The sentences of the page (markdown, captions, alerts), the numbers they quote
SENTENCES = """() => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stMarkdownContainer]'))
  .filter(e => !e.closest('[data-testid=stExpander] details:not([open])')).map(e => e.innerText).join('\\n')"""


def opened(browser, url: str):
    ctx = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = new_page(ctx, 600_000)
    page.goto(url)
    wait_for_app_run(page, 600_000)
    page.wait_for_timeout(500)  # the charts' layout settles after the run
    return ctx, page


def numbers(page) -> list[str]:
    return sorted(NUMBER.findall(page.evaluate(SENTENCES)))


def screens(page, shots, name: str) -> None:
    """One picture per screenful, the whole page scrolled through inside Streamlit's container."""
    page.evaluate("document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
    page.wait_for_timeout(300)
    shot(page, shots, name)
    total = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
    for k, top in enumerate(range(HEIGHT, total, HEIGHT), start=2):
        page.evaluate(f"document.querySelector('[data-testid=stMain]').scrollTo(0, {top})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(shots / f"{name}_{k}.png"))


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_a_page_reads_whole_on_a_phone_in_chinese_and_japanese(browser, shipped_server, shots, view, lang):
    ctx, page = opened(browser, f"{shipped_server}/{VIEWS[view]}")
    try:
        english = numbers(page)
        no_exceptions(page)
    finally:
        ctx.close()
    ctx, page = opened(browser, f"{shipped_server}/{VIEWS[view]}&lang={lang}")
    try:
        text = page.evaluate(SENTENCES)
        assert re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", text), text[:200]
        cut = page.evaluate(CUT)
        charts = page.get_by_test_id("stPlotlyChart")
        cut += [line for k in range(charts.count()) for line in titles_cut_off(charts.nth(k))]
        screens(page, shots, f"phone_{view}_{lang}")
        assert not cut, cut
        assert numbers(page) == english, (numbers(page), english)
        if view == "tour-step-4":
            the_routing_step_reads(page, shots, lang)
        no_exceptions(page)
    finally:
        ctx.close()


ROUTING_STEP = 8  # capsnet-small-mnist's first routing iteration: after the chapter's three steps and four of the walk


def the_routing_step_reads(page, shots, lang: str) -> None:
    """Next from step 4 to the tour's first routing step, its question skipped if asked: the routing figure
    in pieces, a picture per class capsule (of the winner and the runner-up) and one of the share
    bars, one under the other, each inside the window and shown at a size where its smallest text
    (SMALL px as drawn) is at least READABLE px; nothing on the step cut."""
    for k in range(5, ROUTING_STEP + 1):
        page.locator(".st-key-tour_next").get_by_role("button").click()  # the role: not the copy a rerun leaves hidden
        expect(page).to_have_url(re.compile(rf"step={k}\b"))
        wait_for_app_run(page, 600_000)
    skip = page.locator("[class*=st-key-skip_]").get_by_role("button")
    if skip.count():  # a student is asked first; the teacher (this test's session on this server) sees the figure at once
        skip.click()
        wait_for_app_run(page, 600_000)
    page.wait_for_function(
        "() => { const shown = Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stImage] img'))"
        ".filter(i => i.getBoundingClientRect().width > 0); return shown.length === 3 && shown.every(i => i.complete && i.naturalWidth > 0); }"
    )
    pictures = [p for p in page.evaluate(PICTURES) if p["shown"] > 0]
    assert len(pictures) == 3, pictures  # two class capsules, the bars
    for p in pictures:
        assert SMALL * p["shown"] / p["natural"] >= READABLE, p
        assert 0 <= p["left"] and p["right"] <= WIDTH, p
    for above, below in zip(pictures, pictures[1:], strict=False):
        assert below["top"] >= above["bottom"] - 1, (above, below)  # one under the other
    cut = page.evaluate(CUT)
    screens(page, shots, f"phone_tour-routing_{lang}")
    assert not cut, cut


READABLE = 11  # CSS px: the smallest text a phone shows readably
# The main column's pictures as shown: their box and the width they were drawn at
PICTURES = """() => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stImage] img')).map(i => {
  const b = i.getBoundingClientRect();
  return {shown: b.width, natural: i.naturalWidth, left: b.left, right: b.right, top: b.top, bottom: b.bottom};
})"""


@pytest.mark.parametrize("toy", ["dynamic", "em"])
@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_the_playground_figure_reads_on_a_phone(browser, shipped_server, shots, toy, lang):
    """The figure with three upper capsules: a picture per upper capsule and one of the share bars,
    one under the other, none over another, each shown at a size where its smallest text (SMALL
    px as drawn) is at least READABLE px; its title, key and note are text."""
    ctx, page = opened(browser, f"{shipped_server}/playground?toy={toy}&J=3&lang={lang}")
    try:
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stImage] img'))"
            ".every(i => i.complete && i.naturalWidth > 0)"
        )
        pictures = page.evaluate(PICTURES)
        assert len(pictures) == 4, pictures  # three upper capsules, the bars
        for p in pictures:
            assert SMALL * p["shown"] / p["natural"] >= READABLE, p
            assert 0 <= p["left"] and p["right"] <= WIDTH, p
        for above, below in zip(pictures, pictures[1:], strict=False):
            assert below["top"] >= above["bottom"] - 1, (above, below)  # one under the other
        cut = page.evaluate(CUT)
        screens(page, shots, f"phone_playground_{toy}_{lang}")
        assert not cut, cut
        no_exceptions(page)
    finally:
        ctx.close()


def shown_pictures(page, where: str) -> list[dict]:
    """The pictures under `where` as shown (PICTURES' fields), once every one has loaded."""
    page.wait_for_function(f"() => Array.from(document.querySelectorAll('{where} img')).some(i => i.complete && i.naturalWidth > 0)")
    return [p for p in page.evaluate(PICTURES.replace("[data-testid=stMain] [data-testid=stImage] img", f"{where} img"))]


# (view, where its pictures are, the size of their smallest text as drawn, how many)
FIGURES = {
    "explorer-grid": ("explorer?model=capsnet-small-mnist.safetensors&image=7", ".st-key-perturbation_grid", GRID_TEXT, 1),
    "multimnist-couplings": ("multimnist?model=capsnet-multimnist.safetensors", ".st-key-mm_couplings", COUPLING_TEXT, 2),
}


@pytest.mark.parametrize("figure", list(FIGURES))
@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_the_explorer_grid_and_the_multimnist_couplings_read_on_a_phone(browser, shipped_server, shots, figure, lang):
    """The perturbation grid's and the coupling blocks' smallest text (its names of rows and
    columns) shown at READABLE px or more, each picture inside the window."""
    view, where, small, count = FIGURES[figure]
    ctx, page = opened(browser, f"{shipped_server}/{view}&lang={lang}")
    try:
        page.locator(where).scroll_into_view_if_needed()
        pictures = shown_pictures(page, where)
        assert len(pictures) == count, pictures
        for p in pictures:
            assert small * p["shown"] / p["natural"] >= READABLE, p
            assert 0 <= p["left"] and p["right"] <= WIDTH, p
        page.locator(where).screenshot(path=str(shots / f"phone_{figure}_{lang}.png"))
        no_exceptions(page)
    finally:
        ctx.close()


# Every Markdown table's cell: its text's width against its box, and its lines against its words
TABLE_CELLS = """() => Array.from(document.querySelectorAll('[data-testid=stMain] [data-testid=stMarkdownContainer] table :is(th, td)')).map(c => {
  const range = document.createRange();
  range.selectNodeContents(c);
  const tops = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
  const text = c.innerText.replace(/\\u2060/g, '').trim();
  return {text, lines: tops.size, words: text.split(/\\s+/).filter(Boolean).length, scroll: c.scrollWidth, client: c.clientWidth};
})"""

# What a dataframe's text measures in the grid's own font and size (Streamlit's glide grid: the theme's small size)
TEXT_WIDTHS = """(texts) => {
  const style = getComputedStyle(document.querySelector('[data-testid=stDataFrame] .dvn-scroller'));
  const font = style.getPropertyValue('--gdg-font-family');
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = `${style.getPropertyValue('--gdg-base-font-style').trim() || '13px'} ${font || 'sans-serif'}`;
  return texts.map(t => ctx.measureText(t).width);
}"""
PADDING = 17  # px: a grid cell's padding, both sides


def column_edges(frame) -> list[int]:
    """The x (CSS px, from the grid's left) of every column line a dataframe's canvas draws: a pixel
    column of one light grey from the first row's top to the last row's bottom."""
    canvas = frame.locator("canvas").first
    px = np.asarray(Image.open(io.BytesIO(canvas.screenshot())).convert("L")).astype(int)
    body = px[40:-4]  # under the header row
    lines = (body >= 200) & (body <= 245) & (np.abs(body - body[0]) <= 3)
    found = [x for x in range(px.shape[1]) if lines[:, x].mean() > 0.97]
    return [x for k, x in enumerate(found) if x > 4 and (k == 0 or found[k - 1] != x - 1)]  # a line's first pixel column


def cut_cells(page, frame) -> list[tuple[str, float, float]]:
    """The cells of a dataframe (its headers too), across its width, whose text is wider than their column shows:
    (text, its width, the room the column gives it). Scrolled across a step at a time, the column
    lines it draws give each column's place in the whole table (those right of the pinned first
    column move with the scroll; the last column ends where the table does) and each cell's column
    is its aria-colindex."""
    scroller = frame.locator(".dvn-scroller").first
    texts: dict[int, set[str]] = {}
    lines: set[int] = set()
    pinned = None
    while True:
        left, full, visible = scroller.evaluate("e => [e.scrollLeft, e.scrollWidth, e.clientWidth]")
        cells = frame.locator("table[role=grid] tr > [aria-colindex]").evaluate_all(  # the headers too
            "tds => tds.map(td => [Number(td.getAttribute('aria-colindex')), td.innerText])"
        )
        for k, text in cells:
            texts.setdefault(k, set()).add(text)
        found = column_edges(frame)
        pinned = pinned or found[0]  # the first view's first line: the pinned column's right
        lines |= {pinned, round(full)} | {x + round(left) for x in found if x > pinned + 4}  # not its shadow; the last column's right
        if left + visible >= full - 1:
            break
        scroller.evaluate("e => { e.scrollLeft += 60; }")
        page.wait_for_timeout(300)
    ordered = sorted(lines)
    bounds = [0] + [x for k, x in enumerate(ordered) if k == 0 or x - ordered[k - 1] > 2]  # one line seen at two scrolls
    cut = []
    for k, words in sorted(texts.items()):
        if k < len(bounds):
            room = bounds[k] - bounds[k - 1] - PADDING
            words = sorted(words)
            cut += [(text, round(w), room) for text, w in zip(words, page.evaluate(TEXT_WIDTHS, words), strict=True) if w > room + 1]
    assert len(bounds) > 3, bounds  # the lines were found
    return cut


@pytest.mark.parametrize("width", [WIDTH, 1280])
@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_the_lab_and_reproduction_tables_show_every_cell_whole(browser, shipped_server, shots, lang, width):
    """The routing lab's tables (dataframes) and the reproduction page's (Markdown): no cell's or
    header's text wider than its column shows, on a laptop no lab table scrolling sideways, and no
    Markdown cell breaking inside a word (a Chinese or Japanese header squeezed to a character a line)."""
    ctx = browser.new_context(viewport={"width": width, "height": HEIGHT})
    page = new_page(ctx, 600_000)
    try:
        page.goto(f"{shipped_server}/lab?model=capsnet-small-mnist.safetensors&lang={lang}")
        wait_for_app_run(page, 600_000)
        frames = page.get_by_test_id("stDataFrame")
        assert frames.count() == 2
        for k in range(2):
            frame = frames.nth(k)
            frame.scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            frame.screenshot(path=str(shots / f"lang_lab_table_{k}_{lang}_{width}.png"))
            if width > WIDTH:  # a laptop's page shows every column: nothing to scroll sideways to
                full, visible = frame.locator(".dvn-scroller").first.evaluate("e => [e.scrollWidth, e.clientWidth]")
                assert full <= visible + 1, (k, full, visible)
            assert not cut_cells(page, frame), cut_cells(page, frame)
        no_exceptions(page)
        page.goto(f"{shipped_server}/reproduction?lang={lang}")
        wait_for_app_run(page, 600_000)
        cells = page.evaluate(TABLE_CELLS)
        assert len(cells) > 20 and any(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", c["text"]) for c in cells), cells[:5]
        bad = [c for c in cells if c["scroll"] > c["client"] + 1 or (c["words"] == 1 and c["lines"] > 1 and len(c["text"]) < 16)]
        screens(page, shots, f"lang_reproduction_{lang}_{width}")
        assert not bad, bad
        no_exceptions(page)
    finally:
        ctx.close()
