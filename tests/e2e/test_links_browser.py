"""Shared links, opened as a person would in a fresh browser: every page with every shipped model,
and every control restored from the URL. The shipped models read the real test sets."""

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect
from st_helpers import wait_for_app_run

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in (ROOT / "checkpoints").glob("*.safetensors"))
PAGES = ["tour", "zoo", "playground", "explorer", "routing", "em", "multimnist", "robustness", "reproduction", "train", "glossary"]


def settled(page):
    wait_for_app_run(page, timeout=120_000)
    assert page.get_by_test_id("stException").count() == 0, page.get_by_test_id("stException").first.inner_text()
    assert not page.errors, page.errors
    expect(page.get_by_text("Page not found")).to_have_count(0)


@pytest.mark.parametrize("model", SHIPPED)
def test_every_page_opens_by_link_with_each_shipped_model(page, shipped_server, shots, model):
    """Every page path with ?model=NAME: the page's own view, or its line saying which models fit."""
    took = {}
    for name in PAGES:
        t0 = time.perf_counter()
        page.goto(f"{shipped_server}/{name}?model={model}")
        settled(page)
        took[name] = time.perf_counter() - t0
        expect(page.get_by_role("heading", level=1).first).to_be_visible()
        assert f"model={model}" in page.url
        if model.startswith("capsnet-one-iteration") and name in ("routing", "em"):
            page.screenshot(path=str(shots / f"one_iteration_{name}.png"), full_page=True)
    print(f"{model}: page opened by link and settled, s: " + ", ".join(f"{k} {v:.1f}" for k, v in took.items()))


def test_the_one_iteration_model_routes_once_without_a_slider(page, shipped_server):
    page.goto(f"{shipped_server}/routing?model=capsnet-one-iteration-mnist.safetensors&image=7")
    settled(page)
    expect(page.get_by_text("Routing runs once here")).to_be_visible()
    expect(page.get_by_role("slider", name="Show iteration")).to_have_count(0)
    page.get_by_role("slider", name="Routing iterations at inference").focus()
    page.keyboard.press("ArrowRight")  # 2 iterations on the same weights: now there is something to step through
    settled(page)
    expect(page.get_by_role("slider", name="Show iteration")).to_be_visible()
    expect(page).to_have_url(re.compile(r"iterations=2"))


def test_a_link_restores_the_em_view_and_controls_write_the_url(page, server, shots):
    page.goto(f"{server['url']}/em?model=tiny-matrix.safetensors&image=4&iterations=3&t=1&zoom=true&layer=convcaps2&position=0")
    settled(page)
    expect(page.get_by_role("slider", name="EM iterations at inference")).to_have_value("3")
    expect(page.get_by_role("slider", name="Show iteration")).to_have_value("1")
    expect(page.get_by_test_id("stNumberInput").get_by_role("spinbutton")).to_have_value("4")
    expect(page.get_by_text("convcaps2").first).to_be_visible()
    page.get_by_role("slider", name="Show iteration").focus()
    page.keyboard.press("ArrowRight")
    settled(page)
    expect(page).to_have_url(re.compile(r"[?&]t=2"))
    page.screenshot(path=str(shots / "em_from_link.png"), full_page=True)


def test_every_page_path_opens_without_a_pop_up(page, server):
    for name in PAGES:
        page.goto(f"{server['url']}/{name}?model=tiny-capsnet.safetensors")
        settled(page)
