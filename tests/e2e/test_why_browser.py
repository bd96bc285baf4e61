"""The "Why capsules" chapter on the shipped models, as a student opens it on a phone (390 px) and
as a teacher projects it (1920x1080, ?projector=1): every step shown, no chart title cut off, and
on the projector every text at least 20 px, the Streamlit toolbar hidden. Screenshots go to
E2E_SCREENSHOT_DIR."""

import importlib.util

import pytest
from playwright.sync_api import expect
from st_helpers import new_page, titles_cut_off, wait_for_app_run
from test_browser import no_exceptions, shot

pytestmark = pytest.mark.e2e

MODEL = "capsnet-small-mnist.safetensors"  # its sweeps ship in checkpoints/sweeps: the page answers at once
SMALLEST = 20  # px: read from the back of a room at 1920x1080

# Every text the page shows a student: paragraphs, list items, labels, captions, and the charts' titles,
# ticks and legends; returns [text, px] for each one smaller than `least` that is on screen
SIZES = """least => {
  const found = [];
  const main = document.querySelector('[data-testid=stMain]');
  for (const e of main.querySelectorAll('p, li, label, [data-testid=stImageCaption], .gtitle, .xtitle, .ytitle, .xtick text, .ytick text, .legendtext')) {
    const box = e.getBoundingClientRect();
    if (!box.width || !e.textContent.trim()) continue;
    const px = parseFloat(getComputedStyle(e).fontSize);
    if (px < least) found.push([e.textContent.trim().slice(0, 60), px]);
  }
  return found;
}"""


@pytest.mark.parametrize("width,height,projector", [(390, 2400, False), (1920, 1080, True)])
def test_the_chapter_reads_on_a_phone_and_from_the_back_of_a_room(browser, shipped_server, shots, width, height, projector):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = new_page(ctx, timeout=300_000)
    try:
        page.goto(f"{shipped_server}/why?model={MODEL}&why_change=shift&why_shift=4{'&projector=1' if projector else ''}")
        wait_for_app_run(page, timeout=600_000)
        expect(page.get_by_role("heading", name="Why capsules")).to_be_visible()
        for header in (
            "1. Invariance against equivariance",
            "2. Parts in the wrong places",
            "4. Matrix capsules under a change of viewpoint",
        ):
            expect(page.get_by_role("heading", name=header)).to_be_visible()
        expect(page.get_by_text("Moved 4 pixels to the right, the CNN keeps its answer on")).to_be_visible()
        charts = page.get_by_test_id("stPlotlyChart")
        assert charts.count() >= 10
        for k in range(charts.count()):
            assert not titles_cut_off(charts.nth(k)), titles_cut_off(charts.nth(k))
        if projector:
            expect(page.get_by_test_id("stToolbar")).to_be_hidden()
            page.evaluate("window.scrollTo(0, 0)")
            small = page.evaluate(SIZES, SMALLEST)
            assert not small, f"text under {SMALLEST} px on the projector: {small[:10]}"
            wide = charts.first.bounding_box()["width"]
            assert wide > 0.8 * (width - 300 - 2 * 55), f"a figure {wide:.0f} px wide is not the page's width"
            page.evaluate("document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
            page.get_by_text("Open this view on your phone").click()
            code = page.get_by_test_id("stCode")
            expect(code).to_contain_text("/why?")
            address = code.inner_text().strip()
            assert address.startswith(f"{shipped_server}/why?") and "projector=1" in address and "why_shift=4" in address
            if importlib.util.find_spec("segno"):  # the QR code shown is exactly the address's
                from capsviz.viz.share import qr_png

                src = page.get_by_test_id("stExpander").get_by_test_id("stImage").locator("img").first.get_attribute("src")
                assert page.request.get(src if src.startswith("http") else shipped_server + src).body() == qr_png(address, scale=8)
        name = f"why_{width}{'_projector' if projector else ''}"
        page.evaluate("document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
        page.wait_for_timeout(300)
        shot(page, shots, name)
        # Streamlit scrolls inside its own container: one picture per screenful, to look at every step
        total = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
        for k, top in enumerate(range(height, total, height), start=2):
            page.evaluate(f"document.querySelector('[data-testid=stMain]').scrollTo(0, {top})")
            page.wait_for_timeout(300)
            page.screenshot(path=str(shots / f"{name}_{k}.png"))
        no_exceptions(page)
    finally:
        ctx.close()


# Every text of the page whose box reaches past the window's right edge (cut off or making the page
# scroll sideways on a phone): [text, its right edge, the window's width]
OVERFLOW = """() => {
  const found = [];
  const main = document.querySelector('[data-testid=stMain]');
  for (const e of main.querySelectorAll('h1, h2, h3, p, li, label, [data-testid=stImageCaption], .gtitle, .xtitle, .ytitle, .legendtext')) {
    const box = e.getBoundingClientRect();
    if (!box.width || !e.textContent.trim()) continue;
    if (box.right > window.innerWidth + 1) found.push([e.textContent.trim().slice(0, 40), Math.round(box.right), window.innerWidth]);
  }
  return found;
}"""


@pytest.mark.parametrize(
    "lang,title,header,opening",
    [
        ("zh-Hans", "为什么用胶囊", "1. 不变性与同变性", "向右平移 4 个像素后，CNN 在"),
        ("ja", "なぜカプセルか", "1. 不変性と同変性", "右に 4 ピクセル移動させると、CNN は"),
    ],
)
def test_the_chapter_in_chinese_and_japanese_on_a_phone(browser, shipped_server, shots, lang, title, header, opening):
    width, height = 390, 2400
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = new_page(ctx, timeout=300_000)
    try:
        page.goto(f"{shipped_server}/why?model={MODEL}&why_change=shift&why_shift=4&lang={lang}")
        wait_for_app_run(page, timeout=600_000)
        expect(page.get_by_role("heading", name=title)).to_be_visible()
        expect(page.get_by_role("heading", name=header)).to_be_visible()
        expect(page.get_by_text(opening)).to_be_visible()
        charts = page.get_by_test_id("stPlotlyChart")
        assert charts.count() >= 10
        for k in range(charts.count()):
            assert not titles_cut_off(charts.nth(k)), titles_cut_off(charts.nth(k))
        assert not page.evaluate(OVERFLOW), page.evaluate(OVERFLOW)
        name = f"why_{width}_{lang}"
        page.evaluate("document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
        page.wait_for_timeout(300)
        shot(page, shots, name)
        total = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
        for k, top in enumerate(range(height, total, height), start=2):
            page.evaluate(f"document.querySelector('[data-testid=stMain]').scrollTo(0, {top})")
            page.wait_for_timeout(300)
            page.screenshot(path=str(shots / f"{name}_{k}.png"))
        no_exceptions(page)
    finally:
        ctx.close()
