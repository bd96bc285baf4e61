"""Projector mode on every page of the navigation, as a teacher projects it (1920x1080,
?projector=1) with the shipped models: every text a student reads, the charts' titles, ticks and
legends included, at least 20 px; the Streamlit toolbar hidden; no chart title cut off. Screenshots
(one per screenful) go to E2E_SCREENSHOT_DIR to be looked at."""

import pytest
from st_helpers import new_page, titles_cut_off, wait_for_app_run
from test_browser import no_exceptions
from test_every_page_lang_browser import PAGES
from test_why_browser import SIZES, SMALLEST

pytestmark = pytest.mark.e2e

WIDTH, HEIGHT = 1920, 1080
# Every picture shown smaller than 1.5 times its own width while its place has room for more (the
# text drawn in a picture is about 12 px at its own size): [its source's end, shown px, own px]
PICTURES = """() => {
  const found = [];
  for (const img of document.querySelectorAll('[data-testid=stMain] [data-testid=stImage] img')) {
    if (img.closest('[data-testid=stExpander]') || !img.naturalWidth) continue;  // the QR code: at its own size
    const shown = img.getBoundingClientRect().width;
    const room = img.closest('[data-testid=stColumn], [data-testid=stVerticalBlock], [data-testid=stHorizontalBlock]').getBoundingClientRect().width;
    if (shown < 1.5 * img.naturalWidth - 2 && shown < room - 2) found.push([img.src.slice(-12), Math.round(shown), img.naturalWidth]);
  }
  return found;
}"""


@pytest.mark.parametrize("path", ["", *PAGES])
def test_every_page_reads_from_the_back_of_a_room(browser, shipped_server, shots, path):
    ctx = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = new_page(ctx, 600_000)
    try:
        page.goto(f"{shipped_server}/{path}?projector=1")
        wait_for_app_run(page, 600_000)
        page.wait_for_timeout(500)
        assert page.get_by_test_id("stToolbar").is_hidden()
        name = f"projector_{path or 'home'}"
        small, unscaled, total = [], [], page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
        for k, top in enumerate(range(0, total, HEIGHT)):
            page.evaluate(f"document.querySelector('[data-testid=stMain]').scrollTo(0, {top})")
            page.wait_for_timeout(300)
            page.screenshot(path=str(shots / f"{name}_{k}.png"))
            small += [s for s in page.evaluate(SIZES, SMALLEST) if s not in small]
            unscaled += [s for s in page.evaluate(PICTURES) if s not in unscaled]
        assert not unscaled, f"pictures at their own size on the projector (their text too small): {unscaled[:10]}"
        assert not small, f"text under {SMALLEST} px on the projector: {small[:10]}"
        charts = page.get_by_test_id("stPlotlyChart")
        for k in range(charts.count()):
            if charts.nth(k).is_visible():  # not those on a tab not open
                assert not titles_cut_off(charts.nth(k)), titles_cut_off(charts.nth(k))
        no_exceptions(page)
    finally:
        ctx.close()
