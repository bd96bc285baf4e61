"""The dynamic routing page on a shipped CapsNet, at a phone's width and a laptop's: every chart's
title and axis titles are shown whole, inside their chart, not cut off."""

import pytest
from playwright.sync_api import expect
from st_helpers import new_page, titles_cut_off, wait_for_app_run
from test_browser import no_exceptions, shot

pytestmark = pytest.mark.e2e


def cut_off(page) -> list[str]:
    """The chart titles and axis titles that reach outside their chart's frame, on every chart."""
    charts = page.get_by_test_id("stPlotlyChart")
    return [line for k in range(charts.count()) for line in titles_cut_off(charts.nth(k))]


@pytest.mark.parametrize("width", [390, 1280])
def test_the_routing_pages_chart_titles_fit(browser, shipped_server, shots, width):
    ctx = browser.new_context(viewport={"width": width, "height": 2400})
    page = new_page(ctx, 120_000)
    try:
        page.goto(f"{shipped_server}/routing?model=capsnet-mnist.safetensors&iterations=10")
        wait_for_app_run(page)
        expect(page.get_by_role("heading", name="Dynamic routing, iteration by iteration")).to_be_visible()
        expect(page.get_by_text("the count chosen above").first).to_be_visible()  # the 64-image summary is drawn
        titles = page.get_by_test_id("stPlotlyChart").locator(".gtitle")
        expect(titles.first).to_have_text("Iteration 10: couplings c")
        assert page.get_by_test_id("stPlotlyChart").count() >= 7
        assert not cut_off(page), cut_off(page)
        shot(page, shots, f"routing_{width}")
        no_exceptions(page)
    finally:
        ctx.close()
