"""The static site (`capsviz site`) in real chromium, served from 127.0.0.1 with every other request
aborted: the browser's numbers equal PyTorch's (the app's own functions) within 1e-4 on 100 test
images per shipped model, and drawing, the sliders, the routing iterations, the tour, the
playground, links and the embed mode work offline at phone and laptop sizes.

Needs npm (the registry, for the pinned front-end packages) and the real MNIST test set."""

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from capsviz.analysis import image_at, predict
from capsviz.analysis.routing import attention_trace, dynamic_trace
from capsviz.checkpoint import load_checkpoint
from capsviz.data import load_split
from capsviz.paths import shipped_checkpoints

pytestmark = pytest.mark.e2e
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"  # ../shared/data beside the checkout

N = 100  # test images compared per model
TOL = 1e-4


@pytest.fixture(scope="module")
def mnist():
    """The real MNIST test set in ../shared/data: skipped where absent, required in CI."""
    if not (SHARED_DATA / "mnist").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the real data at {SHARED_DATA}")
        pytest.skip("real data not present (../shared/data)")
    return load_split("mnist", "test", data_dir=SHARED_DATA)


@pytest.fixture(scope="module")
def site(tmp_path_factory, mnist):
    if shutil.which("npm") is None:
        pytest.skip("npm not found")
    from capsviz.site import DEFAULT_MODELS, build

    out = tmp_path_factory.mktemp("site")
    paths = [shipped_checkpoints() / f"{m}.safetensors" for m in DEFAULT_MODELS]
    build(out, paths, images=N, data_dir=SHARED_DATA, log=lambda _: None)
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


def draw_a_one(page) -> None:
    """A "1" drawn with the mouse on the site's sketch pad, until the page holds the drawing."""
    page.click("#draw")
    box = page.locator("#sketch").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.2)
    page.mouse.down()
    for k in range(12):
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * (0.2 + 0.05 * k))
    page.mouse.up()
    page.wait_for_function("window.capsviz.state.drawn && window.capsviz.state.drawn.some(v => v > 0)")


def open_site(browser, url, query="", width=1280, height=1400):
    """A page on the site with every request outside the local server aborted and recorded. Its
    service worker is blocked: a page it controls fetches through it, past page.route, so a test's
    routes (a model made unreachable or damaged) would stop applying once it installs (the offline
    tests open their own contexts)."""
    ctx = browser.new_context(viewport={"width": width, "height": height}, service_workers="block")
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    page.outside, page.errors = [], []

    def only_local(route):
        if route.request.url.startswith(url):
            route.continue_()
        else:
            page.outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    if "ask=" not in query:  # the views as they are; the questions before them are test_site_ask_browser's
        query += ("&" if "?" in query else "?") + "ask=0"
    page.goto(url + query)
    page.evaluate("window.capsviz.ready")
    return ctx, page


COMPARE = """async ([name, file, n, J, pixels, I, T]) => {
  const expected = new Float32Array(await (await fetch(file)).arrayBuffer());
  const per = J + pixels + T * I * J;
  const worst = { lengths: 0, reconstruction: 0, couplings: 0, predictions_differ: 0 };
  for (let k = 0; k < n; k++) {
    const got = await window.capsviz.compute(name, k, T);
    const e = expected.subarray(k * per, (k + 1) * per);
    const diff = (a, off) => a.reduce((w, x, i) => Math.max(w, Math.abs(x - e[off + i])), 0);
    worst.lengths = Math.max(worst.lengths, diff(got.lengths, 0));
    worst.reconstruction = Math.max(worst.reconstruction, diff(got.reconstruction, J));
    worst.couplings = Math.max(worst.couplings, diff(got.couplings, J + pixels));
  }
  return worst;
}"""


@pytest.mark.parametrize("name", ["capsnet-small-mnist", "capsnet-mnist", "efficient-capsnet-mnist"])
def test_browser_numbers_equal_pytorch(browser, site, url, mnist, name):
    """Lengths, the reconstruction from the longest capsule and every iteration's couplings, as the
    app computes them (its fast paths included), against the browser's ONNX graphs."""
    model, meta = load_checkpoint(shipped_checkpoints() / f"{name}.safetensors")
    data = mnist
    T = getattr(model.config, "routing_iterations", 1) if meta.config.routing == "dynamic" else 1
    rows = []
    for k in range(N):
        image = image_at(data.images, k)
        p = predict(model, image)
        c = dynamic_trace(model, image, T).c if T > 1 or meta.config.routing == "dynamic" else attention_trace(model, image).c[None]
        rows.append(np.concatenate([p.scores, p.reconstruction.ravel(), c.ravel()]).astype(np.float32))
    (site / "expected.bin").write_bytes(np.concatenate(rows).tobytes())
    I, J = c.shape[-2:]
    ctx, page = open_site(browser, url)
    try:
        worst = page.evaluate(COMPARE, [f"{name}.safetensors", "expected.bin", N, J, p.reconstruction.size, I, T])
    finally:
        ctx.close()
    assert max(worst.values()) < TOL, worst
    assert not page.outside and not page.errors


def test_offline_views_drawing_sliders_iterations_tour(browser, url, mnist, shots):
    """Every view works with outside requests blocked; a drawn digit gives PyTorch's lengths for the
    same pixels; a slider move and an iterations change redraw PyTorch's numbers and land in the link."""
    model, _ = load_checkpoint(shipped_checkpoints() / "capsnet-small-mnist.safetensors")
    ctx, page = open_site(browser, url, "?model=capsnet-small-mnist.safetensors&view=explore")
    try:
        draw_a_one(page)
        page.wait_for_function("window.capsviz.current()")
        page.wait_for_timeout(300)
        drawn = np.array(page.evaluate("Array.from(window.capsviz.state.drawn)"), np.float32).reshape(28, 28)
        assert drawn.sum() > 5
        shown = np.array(page.evaluate("Array.from(window.capsviz.current().v.slice(2*10*16, 3*10*16))"), np.float32).reshape(10, 16)
        p = predict(model, drawn)
        assert np.abs(np.linalg.norm(shown, axis=1) - p.scores).max() < TOL
        assert f"The longest: {int(p.predicted)}" in page.inner_text("#lengths")

        # back to a test image; a slider move redraws the decoder's picture for vector + delta
        page.goto(url + "?model=capsnet-small-mnist.safetensors&view=explore&image=3&ask=0")
        page.evaluate("window.capsviz.ready")
        page.focus("#dim4")
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        page.wait_for_function("window.capsviz.timings.slider.length >= 2")
        page.wait_for_function("decodeURIComponent(location.search).includes('dims=0,0,0,0,0.1')")  # the address follows the view
        image = image_at(mnist.images, 3)
        p = predict(model, image)
        capsule = int(p.predicted)
        vector = torch.as_tensor(p.capsules[capsule]).clone()
        vector[4] += 0.1
        with torch.no_grad():
            want = model.decode(vector, capsule)[0].numpy()
        got = np.array(page.evaluate("Array.from(window.capsviz.current().reconstruction)"), np.float32).reshape(want.shape)
        assert np.abs(got - want).max() < TOL
        # another model: its sliders start at 0 (a slider's offset belongs to the capsule it moved)
        page.select_option("#model", "capsnet-small-multimnist.safetensors")
        page.wait_for_function("window.capsviz.current().model.name === 'capsnet-small-multimnist.safetensors'")
        assert not any(page.evaluate("Array.from(window.capsviz.state.dims)"))
        page.goto(url + "?model=capsnet-small-mnist.safetensors&view=explore&image=3&ask=0&dims=0,0,0,0,0.1")
        page.evaluate("window.capsviz.ready")

        # the routing view: 7 iterations on the same weights
        page.click("nav button[data-view=routing]")
        page.focus("#iterations")
        for _ in range(4):
            page.keyboard.press("ArrowRight")
        page.wait_for_function("window.capsviz.state.iterations === 7")
        page.wait_for_function("window.capsviz.timings.iterations.length >= 4")
        page.wait_for_function("location.search.includes('iterations=7') && location.search.includes('view=routing')")
        tr = dynamic_trace(model, image, 7)
        c = np.array(page.evaluate("Array.from(window.capsviz.current().c)"), np.float32).reshape(10, *tr.c.shape[1:])
        assert np.abs(c[:7] - tr.c).max() < TOL
        assert page.locator("#maps canvas").count() == 10
        assert "Iteration 7 of 7" in page.inner_text("#routing-note")
        page.screenshot(path=str(shots / "site-routing-laptop.png"), full_page=True)

        # the tour, every step
        page.click("nav button[data-view=tour]")
        steps = page.evaluate("window.capsviz.state.step")
        assert steps == 1
        n = int(page.inner_text("#step-of").split()[-1])
        for k in range(2, n + 1):
            page.click("#forward")
            page.wait_for_function(f"document.getElementById('step-of').textContent === 'Step {k} of {n}'")
            assert page.inner_text("#step-title")
            page.wait_for_function(f"location.search.includes('step={k}')")
        page.goto(url + "?model=capsnet-small-mnist.safetensors&view=tour&step=5")
        page.evaluate("window.capsviz.ready")
        assert "Routing, iteration 1 of 3" in page.inner_text("#step-title")
        assert "c_ij" in page.inner_text("#step-help") or "c (" in page.inner_text("#step-help")

        # the playground routes with the shared routing graph
        page.click("nav button[data-view=playground]")
        page.wait_for_function("!document.getElementById('toy-ask').hidden")
        page.click("#toy-ask #ask-skip")  # its question first (tests/e2e/test_site_playground_browser.py answers it)
        page.wait_for_function("document.querySelectorAll('#toy-table tr').length === 8")
        page.wait_for_function("location.search.includes('preset=')")
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_every_view_at_phone_and_laptop_size(browser, url, shots, width):
    """Each view of each model fits the width (nothing wider than the viewport), offline."""
    for model in ["capsnet-mnist", "efficient-capsnet-mnist"]:
        for view in ["explore", "routing", "tour", "playground"]:
            ctx, page = open_site(browser, url, f"?model={model}.safetensors&view={view}&step=5", width=width, height=1600)
            try:
                page.wait_for_timeout(200)
                wide = page.evaluate("document.documentElement.scrollWidth")
                assert wide <= width + 1, f"{model} {view} is {wide}px wide at {width}px"
                page.screenshot(path=str(shots / f"site-{model}-{view}-{width}.png"), full_page=True)
                assert not page.outside and not page.errors, (page.outside, page.errors)
            finally:
                ctx.close()


def test_odd_links_say_what_they_show_and_embed_hides_the_rest(browser, url):
    ctx, page = open_site(browser, url, "?model=nope&image=99999999&iterations=999&view=routing")
    try:
        status = page.inner_text("#status")
        assert "model=nope" in status and "image=99999999" in status and "iterations=999" in status
        assert page.evaluate("window.capsviz.state.image") == 0
        assert page.evaluate("window.capsviz.state.iterations") == 3
    finally:
        ctx.close()
    ctx, page = open_site(browser, url, "?model=capsnet-small-mnist.safetensors&view=explore&embed=1")
    try:
        assert not page.locator("header").is_visible() and page.locator("#explore").is_visible()
    finally:
        ctx.close()


def test_site_folder_holds_only_what_it_needs_within_25_mb(site):
    files = {p.relative_to(site).as_posix() for p in Path(site).rglob("*") if p.is_file()} - {"expected.bin"}
    assert {
        "index.html",
        "site.js",
        "site.css",
        "site.json",
        "graphs/dynamic.onnx",
        "graphs/attention.onnx",
        "data/mnist-28-1.bin.gz",
    } <= files
    assert {"models/capsnet-mnist/encoder.onnx", "models/capsnet-mnist/encoder.weights.gz"} <= files
    assert not any("node_modules" in f or f.endswith(".map") for f in files)
    assert {f for f in files if f.startswith("vendor/")} == {
        "vendor/ort.wasm.min.mjs",
        "vendor/ort-wasm-simd-threaded.mjs",
        "vendor/ort-wasm-simd-threaded.wasm.gz",
    }
    # five models (a MultiMNIST CapsNet and a matrix-capsule model among them) and the Why capsules view's
    # baseline CNN (5.5 MB); a student downloads only those picked, the CNN when they open that view
    assert {"models/cnn-small-mnist/baseline.onnx", "graphs/changes-1-28.onnx"} <= files
    assert sum(p.stat().st_size for p in Path(site).rglob("*") if p.name != "expected.bin") < 38 * 2**20
