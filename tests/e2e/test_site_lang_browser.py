"""The static site in Chinese and Japanese, in real chromium at phone (390 px) and laptop sizes: the
link's lang= (or the browser's languages) picks the words, the numbers stay those of the English
page, no text overflows its box, and the header's switch changes every word without reloading the
models, writing lang= into the address.

Needs npm (the registry, for the pinned front-end packages) and the real MNIST test set."""

import functools
import http.server
import json
import os
import re
import shutil
import threading
from pathlib import Path

import pytest

from capsviz.paths import shipped_checkpoints

pytestmark = pytest.mark.e2e
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
MODEL = "capsnet-small-mnist.safetensors"
CJK = re.compile("[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef]")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if shutil.which("npm") is None:
        pytest.skip("npm not found")
    if not (SHARED_DATA / "mnist").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the real data at {SHARED_DATA}")
        pytest.skip("real data not present (../shared/data)")
    from capsviz.site import build

    out = tmp_path_factory.mktemp("site")
    paths = [shipped_checkpoints() / m for m in (MODEL, "efficient-capsnet-mnist.safetensors")]
    build(out, paths, images=20, data_dir=SHARED_DATA, log=lambda _: None)
    return out


@pytest.fixture(scope="module")
def url(site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}/"
    srv.shutdown()


def open_site(browser, url, query, width=390, locale="en-US"):
    """A page on the site (every request outside the local server aborted), its requests recorded."""
    ctx = browser.new_context(viewport={"width": width, "height": 900}, locale=locale)
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    page.outside, page.errors, page.fetched = [], [], []

    def only_local(route):
        if route.request.url.startswith(url):
            page.fetched.append(route.request.url)
            route.continue_()
        else:
            page.outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(url + query + ("" if "ask=" in query else "&ask=0"))  # the views as they are, without their questions
    page.evaluate("window.capsviz.ready")
    return ctx, page


# every visible text block whose content is wider than its box, and whether the page scrolls sideways
OVERFLOW = """() => {
  const wide = [];
  for (const e of document.querySelectorAll("h1, h2, h3, p, label, button, th, td, figcaption, dt, dd, nav, select, .row, #step-of")) {
    if (!e.offsetParent || e.closest(".chart, [hidden]")) continue;
    if (e.scrollWidth > e.clientWidth + 1) wide.push(`${e.tagName}#${e.id}.${e.className}: ${e.textContent.slice(0, 60)} (${e.scrollWidth} > ${e.clientWidth})`);
  }
  return { wide, page: document.documentElement.scrollWidth - window.innerWidth };
}"""


def texts(page) -> dict:
    """What the checks read of the explorer: the header, its title, the chart's title and bars, the input's label."""
    return page.evaluate(
        """() => ({
      lang: document.documentElement.lang,
      tagline: document.querySelector("h1 span").textContent,
      nav: [...document.querySelectorAll("nav button")].map((b) => b.textContent),
      title: document.querySelector("#explore h2").textContent,
      chart: [...document.querySelectorAll("#lengths .chart-title")].map((t) => t.textContent).join(""),
      xaxis: document.querySelector("#lengths .x-title").textContent,
      bars: [...document.querySelectorAll("#lengths .bar-text")].map((t) => t.textContent),
      label: document.getElementById("label").textContent,
      footer: document.querySelector("footer p").textContent,
      described: document.getElementById("lengths").getAttribute("aria-label"),
    })"""
    )


def shown_in(page, view) -> None:
    page.click(f"nav button[data-view={view}]")
    page.wait_for_function(f"() => !document.getElementById('{view}').hidden && document.documentElement.scrollWidth > 0")
    page.wait_for_timeout(300)


@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_each_language_at_phone_width_with_the_english_numbers(browser, site, url, shots, lang):
    words = json.loads((site / f"words-{lang}.json").read_text(encoding="utf-8"))
    query = f"?view=explore&model={MODEL}&image=3"
    ctx, page = open_site(browser, url, query)
    try:
        english = texts(page)
    finally:
        ctx.close()
    ctx, page = open_site(browser, url, f"{query}&lang={lang}")
    try:
        got = texts(page)
        assert got["lang"] == lang and CJK.search(got["tagline"]) and CJK.search(got["footer"])
        assert got["nav"] == [v["name"] for v in words["views"]] and got["nav"] != english["nav"]
        assert got["title"] == words["messages"]["explore_title"] and CJK.search(got["chart"]) and CJK.search(got["xaxis"])
        assert got["chart"] != english["chart"] and got["label"] != english["label"]
        assert CJK.search(got["described"]) and NUMBER.findall(got["described"]) == NUMBER.findall(english["described"])
        # the same model on the same image: every number the explorer says is the English page's
        assert got["bars"] == english["bars"] and len(got["bars"]) == 10
        assert NUMBER.findall(got["chart"]) == NUMBER.findall(english["chart"])
        assert NUMBER.findall(got["label"]) == NUMBER.findall(english["label"])
        page.wait_for_function(f"location.search.includes('lang={lang}')")
        for view in ("explore", "routing", "tour", "playground"):
            shown_in(page, view)
            found = page.evaluate(OVERFLOW)
            assert not found["wide"] and found["page"] <= 0, (view, found)
            page.screenshot(path=str(shots / f"site-{lang}-390-{view}.png"), full_page=True)
        caption = page.evaluate("() => document.querySelector('#playground h2').textContent")
        assert caption == words["messages"]["playground_title"]
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()
    ctx, page = open_site(browser, url, f"?view=routing&model={MODEL}&lang={lang}", width=1280)
    try:
        note = page.evaluate("() => document.getElementById('routing-note').textContent")
        assert CJK.search(note) and "1/10 = 0.100" in note
        page.screenshot(path=str(shots / f"site-{lang}-1280-routing.png"), full_page=True)
        shown_in(page, "tour")
        page.screenshot(path=str(shots / f"site-{lang}-1280-tour.png"), full_page=True)
        shown_in(page, "explore")
        found = page.evaluate(OVERFLOW)
        assert not found["wide"] and found["page"] <= 0, found
        page.screenshot(path=str(shots / f"site-{lang}-1280-explore.png"), full_page=True)
    finally:
        ctx.close()


def test_the_switch_changes_every_word_without_a_reload_and_an_odd_lang_is_said(browser, site, url, shots):
    ja = json.loads((site / "words-ja.json").read_text(encoding="utf-8"))
    # the browser's language first: a Japanese browser gets Japanese; an odd lang= is said, in Japanese
    ctx, page = open_site(browser, url, f"?view=tour&model={MODEL}&lang=klingon", locale="ja-JP")
    try:
        assert page.evaluate("document.documentElement.lang") == "ja"
        status = page.evaluate("() => document.getElementById('status').textContent")
        assert "lang=klingon" in status and "日本語" in status and CJK.search(status)
        assert page.evaluate("() => document.getElementById('step-of').textContent") == ja["messages"]["tour_step"].format(
            step=1, count=len(ja["tours"][MODEL])
        )
        page.wait_for_function("location.search.includes('lang=ja')")
        page.evaluate("window.notReloaded = true")
        models_before = [u for u in page.fetched if ".onnx" in u or ".weights" in u]
        page.select_option("#lang", "zh-Hans")
        page.wait_for_function("document.documentElement.lang === 'zh-Hans'")
        page.wait_for_function("location.search.includes('lang=zh-Hans')")
        zh = json.loads((site / "words-zh-Hans.json").read_text(encoding="utf-8"))
        got = page.evaluate(
            """() => ({
          still: window.notReloaded === true,
          step: document.getElementById('step-of').textContent,
          title: document.getElementById('step-title').textContent,
          back: document.getElementById('back').textContent,
          tagline: document.querySelector('h1 span').textContent,
          nav: [...document.querySelectorAll('nav button')].map((b) => b.textContent),
          status: document.getElementById('status').textContent,
        })"""
        )
        assert got["still"], "the page reloaded"
        assert (
            got["step"] == zh["messages"]["tour_step"].format(step=1, count=len(zh["tours"][MODEL]))
            and got["back"] == zh["messages"]["tour_back"]
        )
        assert got["title"] == zh["tours"][MODEL][0] and got["tagline"] == zh["messages"]["page_tagline"]
        assert got["nav"] == [v["name"] for v in zh["views"]]
        assert "lang=klingon" in got["status"] and "日本語" in got["status"] and got["status"] != status  # said again in Chinese
        # the models were not fetched again
        assert [u for u in page.fetched if ".onnx" in u or ".weights" in u] == models_before
        page.select_option("#lang", "en")
        page.wait_for_function("document.documentElement.lang === 'en'")
        assert page.evaluate("() => document.getElementById('back').textContent") == "Back"
        assert page.evaluate("window.notReloaded === true")
        assert not page.outside and not page.errors, (page.outside, page.errors)
        page.screenshot(path=str(shots / "site-switch-en.png"))
    finally:
        ctx.close()
