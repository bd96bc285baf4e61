"""The routing lab at a laptop's width (1280 px): with the MultiMNIST models every column of the
tables is in view without scrolling sideways and every cell whole (the pinned model column holds
the longest shipped name); with the MNIST models the seed study's conclusion is
shown whole."""

import pytest
from playwright.sync_api import expect
from st_helpers import new_page, wait_for_app_run
from test_browser import no_exceptions, shot
from test_lang_narrow_browser import cut_cells

from capsviz.analysis import lab

pytestmark = pytest.mark.e2e


def test_every_column_of_the_lab_table_is_in_view_at_1280_px(browser, shipped_server, shots):
    ctx = browser.new_context(viewport={"width": 1280, "height": 2400})
    page = new_page(ctx, 120_000)
    try:
        page.goto(f"{shipped_server}/lab?model=capsnet-small-multimnist.safetensors")
        expect(page.get_by_text("Does routing matter? The short answer")).to_be_visible()
        wait_for_app_run(page)
        heads = []
        for k in range(len(lab.SPLIT)):
            frame = page.get_by_test_id("stDataFrame").nth(k)
            grid = frame.locator("table[role=grid]")
            expect(grid.locator("tbody tr").first).to_be_attached()
            frame.screenshot(path=str(shots / f"lab_table_{k}_1280.png"))
            heads += grid.locator("th").all_inner_texts()  # the grid lists the columns it draws: those in view
            scroller = frame.locator(".dvn-scroller").first
            sizes = scroller.evaluate("e => [e.scrollWidth, e.clientWidth]")
            assert sizes[0] <= sizes[1] + 1, f"the table scrolls sideways: {sizes}"
            cut = cut_cells(page, frame)
            assert not cut, cut
        short = {
            "shifted acc. %": "shifted %",
            "FGSM acc. %": f"FGSM {lab.FGSM_EPSILON:g} %",
            "pair acc. %": "pair %",
        }  # the page's headers
        for column in {name for columns in lab.SPLIT for name in columns}:
            shown = short.get(column, column)
            assert shown in heads, (shown, heads)
        shot(page, shots, "lab_multimnist_1280")
        no_exceptions(page)
        # the seed study (of the MNIST preset) and its conclusion, whole: it was cut at plain()'s length for a name
        page.goto(f"{shipped_server}/lab?model=capsnet-small-mnist.safetensors")
        expect(page.get_by_text("Does routing matter? The short answer")).to_be_visible()
        wait_for_app_run(page)
        expect(
            page.get_by_text("which routing a model was trained with made no difference beyond what the training seed makes.")
        ).to_be_visible()
        shot(page, shots, "lab_1280")
        no_exceptions(page)
    finally:
        ctx.close()
