"""EM routing and MultiMNIST on the static site (issue 51.2), in real chromium: a matrix-capsule
model's every EM iteration (assignments R, activations a, mean poses mu, spreads sigma) and a
MultiMNIST model's two winners and their reconstructions equal PyTorch's (the app's own functions)
within 1e-4 on 100 test images each, measured from what the page computes; the EM view draws Fig. 2's
histograms and the explorer the red/green overlay, at phone and laptop sizes.

Needs npm (the registry, for the pinned front-end packages) and the real MNIST test set."""

import numpy as np
import pytest
from test_site_browser import TOL, mnist, open_site, url  # noqa: F401  (fixtures)

from capsviz.analysis.multimnist import segment
from capsviz.analysis.routing import em_trace
from capsviz.checkpoint import load_checkpoint
from capsviz.paths import shipped_checkpoints

pytestmark = pytest.mark.e2e
N = 100
MATRIX, PAIRS = "matrix-small-mnist", "capsnet-small-multimnist"


@pytest.fixture(scope="module")
def site(tmp_path_factory, mnist):  # noqa: F811
    import shutil

    from test_site_browser import SHARED_DATA

    if shutil.which("npm") is None:
        pytest.skip("npm not found")
    from capsviz.site import build

    out = tmp_path_factory.mktemp("site-em")
    build(out, [shipped_checkpoints() / f"{m}.safetensors" for m in (PAIRS, MATRIX)], images=N, data_dir=SHARED_DATA, log=lambda _: None)
    return out


def test_em_iterations_equal_pytorch(browser, site, url, mnist):  # noqa: F811
    model, _ = load_checkpoint(shipped_checkpoints() / f"{MATRIX}.safetensors")
    ctx, page = open_site(browser, url, "?view=em")
    worst = {"R": 0.0, "a": 0.0, "mu": 0.0, "sigma": 0.0}
    try:
        for k in range(N):
            image = mnist.images[k].numpy().astype(np.float32) / 255.0
            want = em_trace(model, image, None)
            got = page.evaluate(f"window.capsviz.computeEM({k})")
            for name, ref in (("R", want.R), ("a", want.a), ("mu", want.mu), ("sigma", want.sigma)):
                worst[name] = max(worst[name], float(np.abs(np.asarray(got[name], np.float32).reshape(ref.shape) - ref).max()))
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()
    print("EM worst differences from PyTorch:", worst)
    assert max(worst.values()) < TOL, worst


def test_multimnist_winners_and_reconstructions_equal_pytorch(browser, site, url):  # noqa: F811
    import gzip
    import json

    model, _ = load_checkpoint(shipped_checkpoints() / f"{PAIRS}.safetensors")
    manifest = json.loads((site / "site.json").read_text())
    entry = next(m for m in manifest["models"] if m["name"] == f"{PAIRS}.safetensors")
    info = manifest["image_sets"][entry["images"]]
    S = entry["in_size"]
    pixels = np.frombuffer(gzip.decompress((site / info["file"]).read_bytes()), np.uint8).reshape(-1, S, S)
    ctx, page = open_site(browser, url, f"?view=explore&model={PAIRS}.safetensors")
    worst = {"lengths": 0.0, "reconstructions": 0.0}
    right = 0
    try:
        for k in range(N):
            want = segment(model, pixels[k].astype(np.float32) / 255.0)
            got = page.evaluate(f"window.capsviz.computePair('{PAIRS}.safetensors', {k}, {entry['iterations']})")
            assert tuple(got["winners"]) == want.top2, k
            right += set(want.top2) == set(info["labels"][k])
            worst["lengths"] = max(worst["lengths"], float(np.abs(np.asarray(got["lengths"]) - want.scores).max()))
            rec = np.asarray(got["reconstructions"], np.float32).reshape(want.reconstructions.shape)
            worst["reconstructions"] = max(worst["reconstructions"], float(np.abs(rec - want.reconstructions).max()))
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()
    print("MultiMNIST worst differences from PyTorch:", worst, f"both digits right on {right} of {N}")
    assert max(worst.values()) < TOL, worst


def measured_em(trace, t: int) -> str:
    """The site's sentence for iteration t (0-based) of an EM trace (PyTorch's), as the app counts it:
    the most active class capsule, the others' range, its share of all assignment sum_i R_ij / I."""
    a = trace.a[t]
    w = int(a.argmax())
    others = np.delete(a, w)
    share = trace.R[t, :, w].sum() / trace.R.shape[1]
    return (
        f"After iteration {t + 1} of {len(trace.a)}, class {w} is the most active, at {a[w]:.2f} (the other classes "
        f"{others.min():.2f} to {others.max():.2f}), and holds {share:.1%} of all assignment (uniform: {1 / a.size:.1%})."
    )


def test_the_em_sentence_says_pytorchs_numbers_at_every_iteration(browser, site, url, mnist):  # noqa: F811
    model, _ = load_checkpoint(shipped_checkpoints() / f"{MATRIX}.safetensors")
    trace = em_trace(model, mnist.images[2].numpy().astype(np.float32) / 255.0, None)
    ctx, page = open_site(browser, url, "?view=em&image=2")
    try:
        page.wait_for_function("document.getElementById('em-said').textContent !== ''")
        for t in reversed(range(len(trace.a))):
            page.evaluate(
                f"(() => {{ const s = document.getElementById('em-t'); s.value = '{t + 1}'; s.dispatchEvent(new Event('input')); }})()"
            )
            page.wait_for_function(f"document.getElementById('em-said').textContent.startsWith('After iteration {t + 1} of')")
            assert page.inner_text("#em-said") == measured_em(trace, t)
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_the_em_view_and_the_overlay_at_phone_and_laptop_size(browser, url, shots, width):  # noqa: F811
    ctx, page = open_site(browser, url, "?view=em&image=2", width=width, height=1600)
    try:
        page.wait_for_function("document.querySelectorAll('#em-hists .chart svg').length >= 10")
        titles = page.evaluate(
            "Array.from(document.querySelectorAll('#em-hists .chart'), (n) => Array.from(n.querySelectorAll('.chart-title'), (t) => t.textContent).join(' '))"
        )
        assert len(titles) == 10 and "(the answer)" in titles[0] and all("activation" in t and "total R" in t for t in titles)
        assert all(n.get_attribute("aria-label") for n in page.locator("#em-hists .chart").all())
        assert "EM" in page.inner_text("#em-note") and "%" in page.inner_text("#em-note")
        assert page.locator("#model").is_hidden()  # the EM view shows its own model, not the picker's
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
        page.screenshot(path=str(shots / f"site-em-{width}.png"), full_page=True)
        page.evaluate("(() => { const s = document.getElementById('em-t'); s.value = '1'; s.dispatchEvent(new Event('input')); })()")
        page.wait_for_function("document.getElementById('em-hist-title').textContent.startsWith('Iteration 1 of')")
        page.goto(url + f"?view=explore&model={PAIRS}.safetensors&image=3&ask=0")
        page.evaluate("window.capsviz.ready")
        assert page.locator("#pair").is_visible() and page.locator("#model").is_visible()
        note = page.inner_text("#pair-note")
        assert "two longest" in note and "red" in note and "green" in note
        assert page.evaluate("window.capsviz.current().pair.winners.length") == 2
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
        page.screenshot(path=str(shots / f"site-multimnist-{width}.png"), full_page=True)
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()
