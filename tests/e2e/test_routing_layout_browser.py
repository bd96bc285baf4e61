"""The dynamic routing page on a shipped CapsNet, at a phone's width and a laptop's: every chart's
title and axis titles are shown whole, inside their chart, not cut off."""

import pytest
from playwright.sync_api import expect
from st_helpers import wait_for_app_run
from test_browser import no_exceptions, shot

pytestmark = pytest.mark.e2e


def cut_off(page) -> list[str]:
    """The chart titles and axis titles that reach outside their chart's frame."""
    found = []
    charts = page.get_by_test_id("stPlotlyChart")
    for k in range(charts.count()):
        chart = charts.nth(k)
        chart.scroll_into_view_if_needed()
        frame = chart.bounding_box()
        for text in chart.locator(".gtitle, .xtitle, .ytitle").all():
            box = text.bounding_box()
            if box is None:
                continue
            if box["x"] < frame["x"] - 1 or box["x"] + box["width"] > frame["x"] + frame["width"] + 1:
                found.append(
                    f"{text.text_content()!r} ({box['x']:.0f}..{box['x'] + box['width']:.0f} in {frame['x']:.0f}..{frame['x'] + frame['width']:.0f})"
                )
            if text.evaluate("e => e.classList.contains('ytitle')"):
                if box["y"] < frame["y"] - 1 or box["y"] + box["height"] > frame["y"] + frame["height"] + 1:
                    found.append(f"{text.text_content()!r} (taller than its chart)")
    return found


@pytest.mark.parametrize("width", [390, 1280])
def test_the_routing_pages_chart_titles_fit(browser, shipped_server, shots, width):
    ctx = browser.new_context(viewport={"width": width, "height": 2400})
    page = ctx.new_page()
    page.set_default_timeout(120_000)
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
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
