"""User text is text, in chromium: a model trained on a folder of pictures whose class folders are
named like a Markdown image, a link and an emoji, and a link whose ?model= is Markdown, open on
the pages that name the classes. Every request the pages make is recorded: none may leave
127.0.0.1, no element links or points to the outside address, and the names show as typed."""

import re
from pathlib import Path
from urllib.parse import quote, urlparse

import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import expect
from st_helpers import start_streamlit, stop_streamlit, wait_for_app_run
from test_browser import no_exceptions

pytestmark = pytest.mark.e2e

# folder names can hold no '/': "http:evil.example" is still http://evil.example/ to a browser
CLASSES = (
    "![a](http:evil.example)",
    "[log in again](https:evil.example)",
    "<img src=http:evil.example>",
    ":red[alarm] :smile:",
    '<a href="https:evil.example">log in',  # a link in a Plotly chart's labels
)
# Elements that point outside (a heading's own #anchor is no link out), SVG's xlink:href included
POINTING_OUT = """() => [...document.querySelectorAll('*')].flatMap(e => [...e.attributes]
    .filter(a => ['href', 'src', 'xlink:href'].includes(a.name) && a.value.includes('evil') && !a.value.startsWith('#'))
    .map(a => e.outerHTML.slice(0, 200)))"""
# the tour names the classes on its later steps: every step of it
PAGES = ("zoo", *(f"tour?step={k}&" for k in range(1, 15)), "explorer", "routing", "robustness", "lab")


def hostile_model(tmp_path: Path) -> Path:
    """A tiny CapsNet trained (one short epoch, by capsviz's own trainer) on pictures in class
    folders named CLASSES; returns the model folder."""
    from capsviz.train import TrainRun, train

    rng = np.random.default_rng(0)
    data = tmp_path / "pictures"
    for k, name in enumerate(CLASSES):
        (data / name).mkdir(parents=True)
        for i in range(12):
            img = (rng.random((28, 28)) * 60).astype(np.uint8)
            img[4 + 5 * k : 9 + 5 * k, 4:24] = 255
            Image.fromarray(img, "L").save(data / name / f"{i:02d}.png")
    folder = tmp_path / "models"
    folder.mkdir()
    run = TrainRun(
        model="capsnet-small", dataset=f"folder:{data}", epochs=1, batch_size=8, device="cpu", routing_iterations=1, decay_steps=100
    )
    train(run, folder / "hostile.safetensors")
    return folder


@pytest.fixture
def hostile_server(tmp_path, app_env):
    folder = hostile_model(tmp_path)
    env = dict(app_env, CAPSVIZ_CHECKPOINTS=str(folder), CAPSVIZ_HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc, url = start_streamlit(env, tmp_path / "server.log")
    yield url
    print(f"server exit status: {stop_streamlit(proc)}")


def outside_requests(page) -> list[str]:
    """Block every request that leaves 127.0.0.1 and keep its address."""
    outside = []

    def route(r):
        if urlparse(r.request.url).hostname in ("127.0.0.1", "localhost") or r.request.url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return outside


def shown(name: str) -> re.Pattern:
    """`name` as the page shows it: its characters, with at most invisible breaks between."""
    return re.compile(r"[\u200b]?".join(re.escape(ch) for ch in name))


def test_names_from_a_users_files_and_a_link_are_shown_as_text(page, hostile_server):
    outside = outside_requests(page)
    page.set_default_timeout(120_000)
    for name in PAGES:
        page.goto(f"{hostile_server}/{name}{'' if '?' in name else '?'}model=hostile.safetensors")
        wait_for_app_run(page)
        main = page.get_by_test_id("stMain")
        expect(main.get_by_role("heading").first).to_be_visible()
        no_exceptions(page)
        assert page.evaluate(POINTING_OUT) == [], name
        if name == "zoo":  # the classes line names all four, as typed
            caption = page.get_by_text(shown(CLASSES[1])).first
            expect(caption).to_be_visible()
            for cls in CLASSES:
                assert shown(cls).search(caption.inner_text()), (cls, caption.inner_text())
            assert page.locator("img[src*='evil'], [data-testid='stMain'] a[href^='http']:not([href*='127.0.0.1'])").count() == 0
    page.goto(f"{hostile_server}/explorer?model=" + quote("[log in again](https:evil.example)"))
    wait_for_app_run(page)
    notice = page.get_by_text("The link asks for the model", exact=False)
    expect(notice).to_be_visible()
    assert shown("[log in again](https:evil.example)").search(notice.inner_text())
    assert page.evaluate(POINTING_OUT) == []
    page.wait_for_timeout(1000)  # any image the pages asked for has been requested by now
    assert outside == [], outside
