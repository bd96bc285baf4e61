"""The tour's last step on the shipped Efficient-CapsNet, at a phone's width and a laptop's: the
chart's title and the link to the lab are shown whole, not cut off."""

import pytest
from playwright.sync_api import expect
from st_helpers import new_page, titles_cut_off, wait_for_app_run
from test_browser import no_exceptions, shot

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("width", [390, 1366])
def test_the_lab_steps_chart_title_and_link_fit(browser, shipped_server, shots, width):
    ctx = browser.new_context(viewport={"width": width, "height": 2400})
    page = new_page(ctx)
    try:
        page.goto(f"{shipped_server}/tour?model=efficient-capsnet-mnist.safetensors&step=11")  # after the chapter's three steps
        wait_for_app_run(page)
        expect(page.get_by_text("The tallest bar is fixed random couplings")).to_be_visible()
        chart = page.get_by_test_id("stPlotlyChart").first
        title = chart.locator(".gtitle")
        expect(title).to_have_text("Test error by routing")
        assert not titles_cut_off(chart), titles_cut_off(chart)
        link = page.get_by_test_id("stPageLink").filter(has_text="Open the routing lab").first
        expect(link).to_be_visible()
        text = link.locator("p, span").last
        assert text.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the link's label is cut off"
        shot(page, shots, f"tour_lab_{width}")
        no_exceptions(page)
    finally:
        ctx.close()
