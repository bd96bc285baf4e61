"""The static site's "Why capsules" view in real chromium: one digit shifted and turned, the winning
capsule's length and angle and the baseline CNN's score and features against the app's own
computation (capsviz.analysis.why.one_image, PyTorch), the sentence as the app writes it, the parts
moved with both models' answers, in each language at phone and laptop width.

Needs npm (the registry, for the pinned front-end packages) and the real MNIST test set."""

import json

import numpy as np
import pytest
from test_site_browser import mnist, open_site, site, url  # noqa: F401  (fixtures)

from capsviz.analysis import image_at, why
from capsviz.checkpoint import load_checkpoint
from capsviz.paths import shipped_checkpoints

pytestmark = pytest.mark.e2e
SMALL = "capsnet-small-mnist.safetensors"


def shown(page) -> dict:
    return json.loads(page.get_attribute("#why-digit", "data-view"))


def move(page, kind: str, amount: int) -> None:
    page.select_option("#why-change", kind)
    page.evaluate(
        f"(() => {{ const s = document.getElementById('why-amount'); s.value = '{amount}'; s.dispatchEvent(new Event('input')); }})()"
    )
    page.wait_for_function(f"document.getElementById('why-amount-out').textContent === '{amount}'")


@pytest.mark.parametrize("kind, amount", [("shift", 3), ("rotate", -20)])
def test_one_digit_moved_gives_the_apps_numbers_and_sentence(browser, url, mnist, kind, amount):  # noqa: F811
    caps, meta = load_checkpoint(shipped_checkpoints() / SMALL)
    cnn, _ = load_checkpoint(shipped_checkpoints() / "cnn-small-mnist.safetensors")
    image = image_at(mnist.images, 4)
    want = why.one_image(caps, cnn, image, kind)
    names = [str(c) for c in meta.class_names]
    ctx, page = open_site(browser, url, f"?view=why&model={SMALL}&image=4", width=1280)
    try:
        move(page, kind, amount)
        got = shown(page)
        assert got["values"] == [int(v) for v in want["values"]] and got["capsule"] == want["capsule"]
        assert np.abs(np.array(got["lengths"]) - want["lengths"]).max() < 1e-4
        assert np.abs(np.array(got["angles"]) - want["angles"]).max() < 0.05  # degrees: acos near 0 magnifies float32's last digit
        assert np.abs(np.array(got["cnn_score"]) - want["cnn_score"]).max() < 1e-4
        assert np.abs(np.array(got["cnn_features"]) - want["cnn_features"]).max() < 1e-2
        assert page.inner_text("#why-said") == why.one_image_words(want, names, amount)
        _, captions = why.parts_views(caps, cnn, image, names)
        figures = page.locator("#why-parts figcaption").all_inner_texts()
        assert [c.split("\n") for c in figures] == [c.split("\n") for c in captions]
        first, *moved = json.loads(page.get_attribute("#why-parts", "data-answers"))  # the answers the captions above say
        kept = {w: sum(a[w] == first[w] for a in moved) for w in ("cnn", "caps")}
        assert page.inner_text("#why-parts-said") == (
            f"With its parts moved, the CNN keeps its answer for the unchanged digit ({names[first['cnn']]}) in {kept['cnn']} of "
            f"{len(moved)} cases; the capsule network keeps its own ({names[first['caps']]}) in {kept['caps']} of {len(moved)}."
        )
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()


@pytest.mark.parametrize("width", [390, 1280])
@pytest.mark.parametrize("lang", ["en", "zh-Hans", "ja"])
def test_the_view_in_each_language_fits_the_width(browser, url, shots, width, lang):  # noqa: F811
    ctx, page = open_site(
        browser, url, f"?view=why&model={SMALL}&image=0&why_change=rotate&why_angle=30&lang={lang}", width=width, height=1000
    )
    try:
        assert page.inner_text("#why-said") and page.inner_text("#status") == ""  # a sentence for +30 degrees; the link asked nothing odd
        assert page.locator("#why-inputs canvas").count() == 7 and page.locator("#why-parts canvas").count() == 4
        for note in ["#why-body [data-w=why_invariance_note]", "#why-body [data-w=why_parts_note]"]:  # each chapter's words, English too
            assert len(page.inner_text(note)) > 80, (lang, note)
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
        page.screenshot(path=str(shots / f"site-why-{lang}-{width}.png"), full_page=True)
        assert not page.errors, page.errors
    finally:
        ctx.close()


def test_a_model_the_chapter_cannot_show_says_so_and_odd_links_are_said(browser, url):  # noqa: F811
    ctx, page = open_site(browser, url, "?view=why&model=capsnet-small-multimnist.safetensors&why_angle=45&why_change=zoom")
    try:
        assert "capsnet-small-multimnist" in page.inner_text("#why-unfit") and page.locator("#why-body").is_hidden()
        said = page.inner_text("#status")
        assert "why_angle=45" in said and "why_change=zoom" in said
    finally:
        ctx.close()
