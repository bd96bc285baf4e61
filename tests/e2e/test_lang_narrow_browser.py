"""The tour, the explorer and the routing page on a phone (390 px) in Chinese and Japanese, on the
shipped models: no text cut short with an ellipsis, none reaching past the window's right edge, no
chart title outside its chart, and every decimal number the page's sentences quote the same as in
English; and the playgrounds' figure, its pictures one under the other, each shown at a size where
its smallest text reads. Screenshots (one per screenful) go to E2E_SCREENSHOT_DIR."""

import re

import pytest
from st_helpers import new_page, titles_cut_off, wait_for_app_run
from test_browser import no_exceptions, shot

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
        no_exceptions(page)
    finally:
        ctx.close()


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
