"""The static site when things go wrong or are odd (issue 51), in real chromium: a model that cannot
be fetched or is damaged, a host that gzip-encodes the .gz files, offline after one visit (the
service worker), opened from a folder, every odd link parameter; and that it says what it shows:
captions against their charts at each iteration, no tour step with another step's text, axis titles,
text alternatives and contrast.

Needs npm (the registry, for the pinned front-end packages) and the real MNIST test set."""

import functools
import gzip
import http.server
import json
import re
import threading

import numpy as np
import pytest
from test_site_browser import mnist, open_site, site, url  # noqa: F401  (fixtures)

from capsviz.analysis import image_at, predict
from capsviz.checkpoint import load_checkpoint
from capsviz.paths import shipped_checkpoints

pytestmark = pytest.mark.e2e
SMALL = "capsnet-small-mnist.safetensors"
RAW = ("ERROR_CODE", "protobuf", "Unexpected token", "SiteError", "TypeError", "HTTP ", "undefined", "null")


def no_raw_words(text: str):
    assert not any(w in text for w in RAW), text


def status(page) -> str:
    return page.inner_text("#status")


def pick(page, name):
    page.select_option("#model", name)


def test_a_model_that_cannot_be_fetched_or_is_damaged_leaves_the_view_and_says_why(browser, url, shots):  # noqa: F811
    ctx, page = open_site(browser, url, f"?model={SMALL}&view=explore&image=3")
    try:
        before = page.inner_text("#lengths")
        page.route("**/models/capsnet-mnist/**", lambda route: route.abort("internetdisconnected"))
        pick(page, "capsnet-mnist.safetensors")
        page.wait_for_function("document.getElementById('status').textContent.includes('Could not open')")
        said = status(page)
        assert "capsnet-mnist" in said and "could not be downloaded" in said and "still shows capsnet-small-mnist" in said
        assert "reconnect and try again" in said
        assert page.input_value("#model") == SMALL
        assert page.evaluate("window.capsviz.current().model.name") == SMALL
        assert page.inner_text("#lengths") == before
        no_raw_words(said)

        page.route(
            "**/models/efficient-capsnet-mnist/encoder.onnx", lambda route: route.fulfill(status=200, body=b"\x08\x07not a graph" * 50)
        )
        pick(page, "efficient-capsnet-mnist.safetensors")
        page.wait_for_function("document.getElementById('status').textContent.includes('Could not open the model efficient')")
        said = status(page)
        assert "damaged" in said and "still shows capsnet-small-mnist" in said and "rebuild it with capsviz site" in said
        assert page.input_value("#model") == SMALL and page.inner_text("#lengths") == before
        no_raw_words(page.inner_text("body"))
        page.screenshot(path=str(shots / "site-damaged-model-1280.png"))

        page.unroute("**/models/capsnet-mnist/**")  # back online: the same choice now works and the message goes
        pick(page, "capsnet-mnist.safetensors")
        page.wait_for_function("window.capsviz.current().model.name === 'capsnet-mnist.safetensors'")
        assert "Could not open" not in status(page)
        assert not page.errors, page.errors
    finally:
        ctx.close()


@pytest.mark.parametrize(
    "broken, body, what",
    [
        ("site.json", b"<!doctype html><p>Not here</p>", "its list of models (site.json)"),
        ("models/capsnet-small-mnist/encoder.onnx", b"\x08\x07" + b"garbage" * 40, "the model capsnet-small-mnist"),
        ("models/capsnet-small-mnist/encoder.weights.gz", b"\x1f\x8b\x08" + b"garbage" * 40, "the model capsnet-small-mnist"),
    ],
)
def test_a_damaged_file_at_start_is_said_in_plain_words(browser, url, broken, body, what):  # noqa: F811
    ctx = browser.new_context()
    page = ctx.new_page()
    page.route(f"**/{broken}", lambda route: route.fulfill(status=200, body=body))
    try:
        page.goto(url + f"?model={SMALL}")
        page.wait_for_function("!document.getElementById('status').textContent.startsWith('Loading')", timeout=60_000)
        said = status(page)
        assert said.startswith(f"The site could not open {what}: its files on this site are damaged"), said
        assert "rebuild it with capsviz site" in said
        no_raw_words(said)
    finally:
        ctx.close()


@pytest.fixture(scope="module")
def gzip_host(site):  # noqa: F811
    """A host that sends the .gz files with `Content-Encoding: gzip` (so the browser inflates them on arrival)."""

    class Encoding(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_):
            pass

        def end_headers(self):
            if self.path.split("?")[0].endswith(".gz"):
                self.send_header("Content-Encoding", "gzip")
            super().end_headers()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Encoding, directory=str(site)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}/"
    srv.shutdown()


def test_a_host_that_gzip_encodes_the_gz_files_gives_the_same_numbers(browser, gzip_host, mnist):  # noqa: F811
    import urllib.request

    with urllib.request.urlopen(gzip_host + "vendor/ort-wasm-simd-threaded.wasm.gz") as r:  # the host really says so
        assert r.headers["Content-Encoding"] == "gzip" and gzip.decompress(r.read())[:4] == b"\0asm"
    model, _ = load_checkpoint(shipped_checkpoints() / SMALL)
    ctx, page = open_site(browser, gzip_host, f"?model={SMALL}&view=explore")
    try:
        got = page.evaluate(f"window.capsviz.compute('{SMALL}', 5, 3)")
        want = predict(model, image_at(mnist.images, 5))
        assert np.abs(np.array(got["lengths"]) - want.scores).max() < 1e-4
        assert status(page) == "" and not page.errors
    finally:
        ctx.close()


def kept_offline(browser, address: str, **context):
    """A new browser context on `address`, once the page says the site is kept for offline use."""
    ctx = browser.new_context(**context)
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    page.goto(address)
    page.evaluate("window.capsviz.ready")
    page.wait_for_function("document.getElementById('offline').textContent.startsWith('Available offline')")
    return ctx, page


def test_offline_after_one_visit(browser, url, shots):  # noqa: F811
    """The service worker keeps the page, the runtime and the model used: a reload with the network cut works."""
    ctx, page = kept_offline(browser, url + f"?model={SMALL}&view=tour&step=2", viewport={"width": 390, "height": 1400})
    try:
        kept = page.inner_text("#offline")
        version = re.search(r"site version ([0-9a-f]{12})", kept).group(1)
        assert "capsnet-small-mnist" in kept and "efficient" not in kept
        ctx.set_offline(True)
        page.reload()
        page.evaluate("window.capsviz.ready")
        page.evaluate("window.capsviz.offline")  # the page says what is kept once it has looked
        assert page.inner_text("#step-title") == "Conv1: local features"
        assert page.locator("#step-figure canvas").count() == 16 and status(page) == ""
        page.click("nav button[data-view=routing]")
        page.wait_for_function("document.querySelectorAll('#maps canvas').length === 10")
        assert version in page.inner_text("#offline")
        page.screenshot(path=str(shots / "site-offline-routing-390.png"), full_page=True)
        # a model never opened is not there: said in plain words, the view kept
        pick(page, "capsnet-mnist.safetensors")
        page.wait_for_function("document.getElementById('status').textContent.includes('Could not open')")
        assert "could not be downloaded" in status(page)
    finally:
        ctx.close()


def test_every_view_is_kept_offline_when_asked_and_the_language_with_it(browser, url, site, shots):  # noqa: F811
    """In Japanese: the page keeps its words (words-ja.json) for offline use, and the button keeps every
    view's files, so EM routing and "Why capsules", never opened, work with the network cut."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 1400})
    page = ctx.new_page()
    page.set_default_timeout(120_000)
    try:
        page.goto(url + f"?model={SMALL}&lang=ja")
        page.evaluate("window.capsviz.offline")
        button = page.locator("#keep-all")
        button.wait_for(state="visible")
        listed = json.loads((site / "site.json").read_text())["offline"]
        assert any(f.startswith("models/matrix-small-mnist/") for f in listed) and any(f.startswith("graphs/") for f in listed)
        assert "MB" in button.inner_text() and "オフライン" in button.inner_text()
        button.click()
        button.wait_for(state="hidden")
        kept = page.inner_text("#offline")
        assert kept.startswith("オフラインで使えます") and all(
            m in kept for m in ("matrix-small-mnist", "capsnet-mnist", "efficient-capsnet-mnist")
        ), kept
        ctx.set_offline(True)
        for view, drawn in (("em", "#em-note"), ("why", "#why-rows-note")):
            page.goto(url + f"?view={view}&lang=ja")
            page.evaluate("window.capsviz.offline")
            assert page.evaluate("document.documentElement.lang") == "ja"
            assert status(page) == "", (view, status(page))
            assert "オフライン" in page.inner_text("#offline") and re.search(r"[\u3040-\u30ff]", page.inner_text(drawn)), view
            assert re.search(r"[\u3040-\u30ff]", page.inner_text("nav")), view  # its words, not English
        page.screenshot(path=str(shots / "site-offline-why-ja-1280.png"), full_page=True)
    finally:
        ctx.close()


def test_a_file_a_view_cannot_open_is_named(browser, url):  # noqa: F811
    """A graph of the "Why capsules" view that is damaged: the page names that file, not "its runtime"."""
    ctx = browser.new_context()
    page = ctx.new_page()
    page.route("**/graphs/changes-*.onnx", lambda route: route.fulfill(status=200, body=b"\x08\x07" + b"garbage" * 40))
    try:
        page.goto(url + "?view=why")
        page.wait_for_function("!document.getElementById('status').textContent.startsWith('Loading')", timeout=60_000)
        said = status(page)
        assert re.match(r"The site could not open the file graphs/\S+\.onnx: its files on this site are damaged", said), said
        no_raw_words(said)
    finally:
        ctx.close()


def test_a_new_version_replaces_the_offline_copy(browser, url, site):  # noqa: F811
    """A new build's sw.js (another VERSION) is installed on the next check: its cache replaces the old one."""
    built = (site / "sw.js").read_text()
    ctx, page = kept_offline(browser, url + f"?model={SMALL}")
    try:
        page.reload()  # now the worker controls the page
        page.evaluate("window.capsviz.ready")
        page.wait_for_function("document.getElementById('offline').textContent.startsWith('Available offline')")
        old = page.evaluate("caches.keys()")
        assert len(old) == 1
        (site / "sw.js").write_text(built.replace(old[0].removeprefix("capsviz-"), "0123456789ab"))  # as a new build writes it
        page.evaluate("navigator.serviceWorker.getRegistration().then((r) => r.update())")
        page.wait_for_function("document.getElementById('offline').textContent.startsWith('A new version')")
        page.wait_for_function("caches.keys().then((k) => k.length === 1 && k[0] === 'capsviz-0123456789ab')")
        assert "reload the page" in page.inner_text("#offline")
    finally:
        (site / "sw.js").write_text(built)
        ctx.close()


def test_the_built_worker_carries_the_builds_version(site):  # noqa: F811
    """The service worker names its cache by the build's version, which names the build's files."""
    from capsviz.site import offline

    sw = (site / "sw.js").read_text()
    version = json.loads((site / "site.json").read_text())["version"]
    assert f'const VERSION = "{version}"' in sw and "caches.delete" in sw
    assert offline.service_worker("abc", ["index.html"]) != offline.service_worker("abd", ["index.html"])


def test_opened_from_a_folder_it_says_how_to_serve_it(browser, site):  # noqa: F811
    ctx = browser.new_context()
    page = ctx.new_page()
    try:
        page.goto((site / "index.html").as_uri())
        said = status(page)  # at once: the page's first script, not after a timeout
        assert "opened from a folder" in said and "python3 -m http.server" in said
    finally:
        ctx.close()


def test_a_host_that_sends_the_scripts_with_the_wrong_type_is_said_at_once(browser, url, site):  # noqa: F811
    body = (site / "vendor" / "ort.wasm.min.mjs").read_bytes()
    ctx = browser.new_context()
    page = ctx.new_page()
    page.route("**/vendor/ort.wasm.min.mjs", lambda route: route.fulfill(status=200, body=body, content_type="application/octet-stream"))
    try:
        page.goto(url)
        page.wait_for_function("!document.getElementById('status').textContent.startsWith('Loading')", timeout=10_000)
        said = status(page)
        assert "program did not load" in said and "text/javascript" in said
    finally:
        ctx.close()


# (link, what it asked, what is shown): each odd parameter's note names both
ODD = [
    ("view=nope", "view=nope", "the Explorer"),
    ("embed=yes", "embed=yes", "the full page"),
    ("model=nope", "model=nope", "capsnet-small-mnist"),
    ("image=-1", "image=-1", "shows 0"),
    ("capsule=99", "capsule=99", "the longest capsule"),
    ("dims=NaN,1e308,0.1,abc", "d0=NaN", "as 0.00"),
    ("dims=NaN,1e308,0.1,abc", "d1=1e308", "as 0.25"),
    ("dims=NaN,1e308,0.1,abc", "d3=abc", "as 0.00"),
    ("iterations=999", "iterations=999", "shows 3"),
    ("t=0", "t=0", "shows 3"),
    ("step=99", "step=99", "shows {last}"),  # the last step of the model's tour, as the app opens it
    ("routing=em", "routing=em", "each model's own routing"),
    ("preset=nope", "preset=nope", "the preset"),
    ("J=7", "J=7", "3 upper capsules"),
    ("rule=em", "rule=em", "routing by agreement"),
    ("T=11", "T=11", "shows 3"),
    ("cap=9", "cap=9", "shows 1"),
    ("pts=1_2", "pts=1_2", "the preset's predictions"),
    ("colour=red", "colour=red", "left out"),
]


def test_every_odd_link_parameter_says_what_it_asked_and_what_is_shown(browser, site, url, shots):  # noqa: F811
    query = "&".join(dict.fromkeys(q for q, _, _ in ODD))
    manifest = json.loads((site / "site.json").read_text())
    last = len(next(m for m in manifest["models"] if m["name"] == SMALL)["tour"])
    ctx, page = open_site(browser, url, f"?{query}", width=390)
    try:
        said = status(page)
        page.screenshot(path=str(shots / "site-odd-link-390.png"))
        for q, asked, shown in ODD:
            at = said.find(asked)
            assert at >= 0, (q, said)
            sentence = said[at : said.find(". ", at) + 1 or None]
            assert shown.format(last=last) in sentence, (q, sentence)
        assert "null" not in said and "NaN instead" not in said and "d2=" not in said  # 0.1 is in range: no note
        state = page.evaluate("window.capsviz.state")
        assert state["view"] == "explore" and state["image"] == 0 and state["iterations"] == 3 and state["toy"]["J"] == 3
        assert state["step"] == last
        assert page.evaluate("Array.from(window.capsviz.state.dims.slice(0, 4))") == pytest.approx([0, 0.25, 0.1, 0])
    finally:
        ctx.close()
    # a one-pass model asked for iterations; the site's own links never ask it
    ctx, page = open_site(browser, url, "?model=efficient-capsnet-mnist.safetensors&view=routing&iterations=5")
    try:
        said = status(page)
        assert "iterations=5" in said and "one pass" in said
        page.wait_for_function("!location.search.includes('iterations=')")  # the address follows the view
    finally:
        ctx.close()


def test_routing_captions_follow_the_iteration_shown(browser, url):  # noqa: F811
    ctx, page = open_site(browser, url, "?model=capsnet-mnist.safetensors&view=routing&image=0&iterations=3&t=3")
    try:
        for t in (1, 2, 3):
            page.evaluate(f"(() => {{ const s = document.getElementById('t'); s.value = '{t}'; s.dispatchEvent(new Event('input')); }})()")
            page.wait_for_function(f"document.getElementById('routing-note').textContent.startsWith('Iteration {t} of 3')")
            page.wait_for_timeout(100)
            captions = page.locator("#maps figcaption").all_inner_texts()
            chart = page.evaluate("document.getElementById('iter-lengths').chart.series.map((s) => s.values)")
            for j, caption in enumerate(captions):
                shown = float(re.search(r"\|v\| ([0-9.]+)", caption).group(1))
                assert shown == pytest.approx(chart[j][t - 1], abs=0.005), (t, j, caption, chart[j])
            assert f"after iteration {t}" in page.inner_text("#maps")
            bars = page.evaluate("(() => { const d = document.getElementById('iter-uniform').chart; return [d.values, d.text]; })()")
            assert [f"{y:.2f}%" for y in bars[0]] == bars[1]  # the numbers on the bars: 100.00 / 99.99 / 99.91 told apart
    finally:
        ctx.close()


@pytest.mark.parametrize("model", ["capsnet-small-mnist", "efficient-capsnet-mnist"])
def test_no_tour_step_shows_another_steps_text_and_every_chart_has_axis_titles(browser, url, model):  # noqa: F811
    # an image past the ones the app's words come with: the site's own figure of each step (test_site_tour_browser has the others)
    ctx, page = open_site(browser, url, f"?model={model}.safetensors&view=tour&step=1&image=25")
    try:
        steps = page.evaluate(
            f"fetch('site.json').then((r) => r.json()).then((m) => m.models.find((x) => x.name === '{model}.safetensors').tour)"
        )
        for k, step in enumerate(steps, 1):
            if k > 1:
                page.click("#forward")
            page.wait_for_function(f"document.getElementById('step-of').textContent.startsWith('Step {k} of')")
            page.wait_for_timeout(100)
            figure = page.inner_text("#step-figure")
            key = step["key"]
            assert ("routing lab" in figure) == (key == "lab"), (key, figure)
            assert "full capsviz app's guided tour" not in figure, key  # every step the site has, it draws
            if key in ("conv1", "convs"):
                assert page.locator("#step-figure canvas[aria-label^='Feature map']").count() == 16, key
            if model.startswith("efficient") and key == "primary":
                assert "6x6" not in page.inner_text("#step-help") and "each seeing the whole image" in page.inner_text("#step-numbers")
            for p in page.locator("#step-figure .chart").all():
                assert p.locator(".x-title").first.text_content() and p.locator(".y-title").text_content(), key
    finally:
        ctx.close()


def contrast(a, b) -> float:
    def lum(rgb):
        c = [x / 255 for x in rgb]
        c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    hi, lo = sorted([lum(a), lum(b)], reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def rgb(css: str):
    return [int(x) for x in re.findall(r"[0-9]+", css)[:3]]


@pytest.mark.parametrize("model", ["capsnet-mnist", "efficient-capsnet-mnist"])
def test_charts_and_pictures_have_text_alternatives_and_text_has_contrast(browser, url, model):  # noqa: F811
    for view in ["explore", "routing", "tour", "playground"]:
        step = "&step=3" if view == "tour" else ""
        ctx, page = open_site(browser, url, f"?model={model}.safetensors&view={view}{step}")
        try:
            page.wait_for_timeout(200)
            for node in page.locator(f"#{view} canvas, #{view} .chart, #{view} svg#toy, #input:not([hidden]) canvas").all():
                if not node.is_visible():
                    continue
                assert node.get_attribute("role") == "img", (view, node.evaluate("(n) => n.outerHTML.slice(0, 80)"))
                alt = node.get_attribute("aria-label") or ""
                assert alt, (view, node.evaluate("(n) => n.outerHTML.slice(0, 80)"))
                if "chart" in (node.get_attribute("class") or "") or view == "playground":
                    assert re.search(r"[0-9]\.[0-9]", alt), (view, alt)  # the numbers it shows
            for p in page.locator(f"#{view} .chart").all():
                if p.is_visible():
                    assert p.locator(".x-title").first.text_content() and p.locator(".y-title").text_content(), view
            if view == "explore":  # the perturbation grid: a row label per dimension, a column label per step
                assert page.locator("#grid-box .rows span").all_inner_texts() == [f"d{d}" for d in range(16)]
                assert page.locator("#grid-box .cols span").all_inner_texts()[::5] == ["-.25", "0", "+.25"]
            if view == "routing" and model.startswith("efficient"):  # the coupling matrix: classes, capsules, scale
                assert page.locator("#maps .cols span").all_inner_texts() == [str(j) for j in range(10)]
                assert page.locator("#maps .rows span").count() == 16 and page.locator("#maps .scale").count() == 1
            page_bg = rgb(page.evaluate("getComputedStyle(document.documentElement).backgroundColor"))
            if view == "playground":
                texts = page.locator("#toy text, #toy-table th[style]").all()
                assert texts
                for t in texts:
                    colour = t.evaluate("(n) => getComputedStyle(n)[n.tagName === 'text' ? 'fill' : 'color']")
                    assert contrast(rgb(colour), [255, 255, 255]) >= 4.5, colour
            page.focus("nav button[data-view=tour]")
            page.keyboard.press("Shift+Tab")
            page.keyboard.press("Tab")
            ring = page.evaluate("getComputedStyle(document.activeElement).outlineColor")
            assert contrast(rgb(ring), page_bg) >= 3, ring
            assert not page.errors, page.errors
        finally:
            ctx.close()
