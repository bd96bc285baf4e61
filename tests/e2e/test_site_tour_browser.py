"""The static site's guided tour in real chromium with the app's own explanations (capsviz.site.tours):
every step of every family's tour, the EM tour among them, in each language, at phone and laptop
width: each step shows its own words (the ones exported for that step), its measured sentence and
a figure; an image past the explained ones and a drawing say where the explanations are; the EM
view's iteration lives in the link.

Needs npm (the registry, for the pinned front-end packages) and the real MNIST test set."""

import gzip
import json
import re

import pytest
from test_site_browser import draw_a_one, mnist, open_site, site, url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e
SMALL = "capsnet-small-mnist.safetensors"

# every visible block of text wider than its box, and whether the page scrolls sideways
OVERFLOW = """() => {
  const wide = [];
  for (const e of document.querySelectorAll("#tour p, #tour label, #tour button, #tour th, #tour td, #tour figcaption, #tour dt, #tour dd, #tour h2")) {
    if (!e.offsetParent || e.closest(".table-box, .grid-box")) continue;
    if (e.scrollWidth > e.clientWidth + 1) wide.push(`${e.tagName}#${e.id}: ${e.textContent.slice(0, 60)}`);
  }
  return { wide, page: document.documentElement.scrollWidth - window.innerWidth };
}"""


# the longest class capsule's length after T iterations of the image the page computed last, as the sentences write it
LONGEST = """(T) => {
  const r = window.capsviz.current();
  let best = 0;
  for (let j = 0; j < r.J; j++) {
    let s = 0;
    for (let d = 0; d < r.D; d++) s += r.v[((T - 1) * r.J + j) * r.D + d] ** 2;
    best = Math.max(best, Math.sqrt(s));
  }
  return best.toFixed(2);
}"""


def plain(markdown: str) -> str:
    """A paragraph as the page shows it: the tour's Markdown emphasis gone."""
    return re.sub(r"\*\*?([^*]+)\*\*?", r"\1", markdown)


def words(site, entry: str, lang: str) -> list:  # noqa: F811
    manifest = json.loads((site / "site.json").read_text())
    m = next(x for x in manifest["models"] + manifest["em_models"] if x["name"] == entry)
    return json.loads(gzip.decompress((site / m["explained"]["files"][lang]).read_bytes()))


def walk_every_step(page, steps: list, name: str, shots, tag: str) -> None:
    """Next through every step, checking each shows its own words, its measured sentence and a figure."""
    for k, step in enumerate(steps, 1):
        if k > 1:
            page.click("#forward")
        page.wait_for_function(f"window.capsviz.state.step === {k} && document.getElementById('step-text').textContent.length > 0")
        page.wait_for_timeout(150)
        shown = page.inner_text("#step-text")
        assert all(plain(p) in shown for p in step["text"]), (name, step["key"], shown[:200])
        others = [plain(p) for s in steps if s["key"] != step["key"] for p in s["text"] if p not in step["text"]]
        assert not any(o in shown for o in others), (name, step["key"])  # no step shows another step's words
        measured = page.locator("#step-measured")
        assert measured.is_visible() == bool(step["measured"]), (name, step["key"])
        if step["measured"]:
            assert plain(step["measured"])[:60] in measured.inner_text()
        figure = page.locator("#step-figure canvas, #step-figure svg, #step-figure table, #step-figure .chart")
        assert figure.count() > 0, (name, step["key"])  # every step draws its figure
        found = page.evaluate(OVERFLOW)
        assert not found["wide"] and found["page"] <= 0, (name, step["key"], found)
        page.screenshot(path=str(shots / f"site-tour-{tag}-step{k}.png"), full_page=True)


@pytest.mark.parametrize("lang", ["en", "zh-Hans", "ja"])
@pytest.mark.parametrize(
    "entry, query",
    [
        (SMALL, f"?view=tour&model={SMALL}"),
        ("efficient-capsnet-mnist.safetensors", "?view=tour&model=efficient-capsnet-mnist.safetensors"),
        ("matrix-small-mnist.safetensors", f"?view=tour&model={SMALL}&tour=em"),
    ],
)
def test_every_step_of_every_tour_shows_the_apps_words_at_phone_width(browser, site, url, shots, entry, query, lang):  # noqa: F811
    steps = words(site, entry, lang)[3]
    ctx, page = open_site(browser, url, f"{query}&image=3&lang={lang}", width=390, height=1000)
    try:
        assert page.evaluate("window.capsviz.state.tourOf") == (entry if "tour=em" in query else None)
        walk_every_step(page, steps, entry, shots, f"{entry.split('.')[0]}-{lang}-390")
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()


@pytest.mark.parametrize("entry, query", [(SMALL, f"?view=tour&model={SMALL}"), ("matrix-small-mnist.safetensors", "?view=tour&tour=em")])
def test_every_step_at_laptop_width(browser, site, url, shots, entry, query):  # noqa: F811
    ctx, page = open_site(browser, url, f"{query}&image=0", width=1280, height=1000)
    try:
        walk_every_step(page, words(site, entry, "en")[0], entry, shots, f"{entry.split('.')[0]}-en-1280")
        assert not page.errors, page.errors
    finally:
        ctx.close()


def test_an_image_past_the_explained_ones_says_where_the_words_are(browser, site, url):  # noqa: F811
    manifest = json.loads((site / "site.json").read_text())
    n = next(m for m in manifest["models"] if m["name"] == SMALL)["explained"]["images"]
    ctx, page = open_site(browser, url, f"?view=tour&model={SMALL}&image={n}&step=3")
    try:
        note = page.inner_text("#step-text")
        assert f"first {n} test images" in note and f"pick test image 0 to {n - 1}" in note
        assert page.locator("#step-figure canvas").count() == 1  # the site's own figure of the step
        page.goto(url + "?view=tour&model=capsnet-small-multimnist.safetensors&image=0")
        page.evaluate("window.capsviz.ready")
        assert "pairs" in page.inner_text("#step-text")
        assert not page.errors, page.errors
    finally:
        ctx.close()


def every_explained_paragraph(site, entry: str, lang: str) -> set[str]:  # noqa: F811
    """Every paragraph and measured sentence the app's tour says about one of the site's explained
    images and not about all of them (one said of every image depends on none)."""
    said, seen = set(), []
    for steps in words(site, entry, lang):
        mine = set()
        for step in steps:
            mine.update(plain(p) for p in step["text"])
            if step["measured"]:
                mine.add(plain(step["measured"]))
        said |= mine
        seen.append(mine)
    return said - set.intersection(*seen)


@pytest.mark.parametrize("lang, note", [("en", "pick test image 0 to 19"), ("ja", "テスト画像 0〜19 を選ぶ")])
def test_a_drawing_walks_the_tour_with_its_own_figures_and_numbers_and_no_other_images_words(browser, site, url, shots, lang, note):  # noqa: F811
    """A digit drawn, then every step of the tour: each draws its figure from the drawing's numbers,
    says the app's measured sentences (and the routing steps their paragraphs) on them, written by the
    page (web/js/said.js, compared with the app's in tests/test_site_js.py), says exactly what only the
    build writes and what to do, and shows no sentence the app wrote for a test image."""
    model = next(m for m in json.loads((site / "site.json").read_text())["models"] if m["name"] == SMALL)
    steps = model["tour"]
    elsewhere = every_explained_paragraph(site, SMALL, lang)
    ctx, page = open_site(browser, url, f"?view=tour&model={SMALL}&image=0&lang={lang}&ask=1", width=390, height=1000)
    console = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    try:
        draw_a_one(page)
        for k, step in enumerate(steps, 1):
            if k > 1:
                page.click("#forward")
            page.wait_for_function(
                f"window.capsviz.state.step === {k} && (document.getElementById('step-text').textContent.length > 0"
                " || document.getElementById('step-figure').textContent.length > 0)"
            )
            page.wait_for_timeout(150)
            assert page.locator("#tour-ask").is_hidden()  # the app's questions are about test images
            text = page.inner_text("#step-body")
            # the note says what only the build writes (the app's figure, table, question, the answer's label), on the steps that have one
            assert (note in page.inner_text("#step-text")) == (step["kind"] in ("primary", "predictions", "iteration", "lengths")), (
                k,
                text[:300],
            )
            if step["kind"] != "lab":  # every other step's paragraphs, written on the drawing's numbers
                assert len(page.locator("#step-text p").all()) >= 1 and page.inner_text("#step-text").strip(), (k, step["key"])
            if step["kind"] == "lab":  # the one step whose words the page does not write: none of a test image's
                assert not any(p in text for p in elsewhere if len(p) > 20), (k, step["key"])
            if step["kind"] != "lab":
                assert page.locator("#step-figure canvas, #step-figure svg, #step-figure .chart").count() > 0, step["key"]
            measured = page.locator("#step-measured")
            assert measured.is_visible() == (step["kind"] in ("primary", "predictions", "iteration", "lengths")), step["key"]
            if measured.is_visible():
                assert measured.inner_text().startswith("ここで測った値" if lang == "ja" else "Measured here"), measured.inner_text()
            if step["kind"] == "lengths":  # the margin sentence quotes the drawing's own longest capsule
                assert page.evaluate(LONGEST, model["iterations"]) in measured.inner_text(), measured.inner_text()
            if step["kind"] == "iteration":  # both paragraphs, and the rule's verdict in the measured sentence
                assert len(page.locator("#step-text p").all()) == 3, text[:300]  # the two paragraphs and the note
                assert ("b_ij" in page.inner_text("#step-text")) and (
                    step["iteration"] == 1 or "一様" in measured.inner_text() or "uniform" in measured.inner_text()
                )
                assert page.locator("#step-figure .rule-caption").count() == 0  # the app's sentences, not the site's own
            page.screenshot(path=str(shots / f"site-tour-drawing-{lang}-step{k}.png"), full_page=True)
        # the same drawing through Efficient-CapsNet's tour, then the EM tour, on the same page
        manifest = json.loads((site / "site.json").read_text())
        efficient = next(m for m in manifest["models"] if m["name"] == EFFICIENT)
        page.select_option("#model", EFFICIENT)
        page.wait_for_function(f"document.getElementById('model').value === '{EFFICIENT}' && !window.capsviz.state.drawn")
        draw_a_one(page)
        # picking the tour to follow opens it at its first step
        walk_a_drawing(
            page, lambda: page.select_option("#tour-of", EFFICIENT), efficient["tour"], EFFICIENT_SAID, note, shots, f"efficient-{lang}"
        )
        walk_a_drawing(
            page, lambda: page.select_option("#tour-of", EM), manifest["em_models"][0]["tour"], EM_SAID, note, shots, f"em-{lang}"
        )
        assert not page.outside and not page.errors and not console, (page.outside, page.errors, console)
    finally:
        ctx.close()


EFFICIENT, EM = "efficient-capsnet-mnist.safetensors", "matrix-small-mnist.safetensors"
# What the page writes for a drawing on each step of the two tours, by the step's kind: whether the
# step has paragraphs, a measured sentence, and a note on what only the build writes ("part": a note
# naming the paragraphs that quote numbers the site's graphs do not return, which say lambda on the EM
# tour's; "figure", "answer": the notes that the app's figure, or the answer's sentence that quotes the
# label, and the question are the build's; "steps": the note that the step shows only its own figure
# and numbers)
EFFICIENT_SAID = {
    "input": (False, False, "steps"),
    "convs": (False, False, "steps"),
    "primary": (False, True, "part"),
    "predictions": (True, True, "figure"),
    "routing": (False, True, "part"),
    "lengths": (True, True, "answer"),
    "reconstruction": (True, False, None),
    "lab": (False, False, None),
}
EM_SAID = {
    "input": (True, False, None),
    "primary": (False, False, None),  # the app's figure only: the step says so in its place
    "votes": (False, False, None),
    "iteration": (False, True, "lambda"),
    "activations": (True, False, "lambda"),
}


def walk_a_drawing(page, first, steps: list, said: dict, note: str, shots, tag: str) -> None:
    """Every step of a tour on the drawing, from `first()` that opens it: its paragraphs, measured
    sentence and note as `said` has them for its kind, no placeholder left unfilled, and no paragraph
    of one step on another."""
    seen = {}
    for k, step in enumerate(steps, 1):
        page.evaluate(
            "['step-text', 'step-figure'].forEach((id) => document.getElementById(id).replaceChildren())"
        )  # none of the last step's
        first() if k == 1 else page.click("#forward")
        page.wait_for_function(
            f"window.capsviz.state.step === {k}"
            " && (document.getElementById('step-text').textContent.length > 0 || document.getElementById('step-figure').textContent.length > 0)"
        )
        page.wait_for_timeout(150)
        text, where = page.inner_text("#step-body"), (tag, k, step["key"])
        assert not re.search(r"\{[A-Za-z_]+\}", text), (*where, text[:300])
        paragraphs, measured = said[step["kind"]][:2]
        notes = [p.inner_text() for p in page.locator("#step-text p.note").all()]
        written = [p.inner_text() for p in page.locator("#step-text p:not(.note)").all()]
        assert bool(written) == paragraphs and all(len(p) > 20 for p in written), (*where, written)
        assert page.locator("#step-measured").is_visible() == measured, where
        if measured:
            written.append(page.inner_text("#step-measured"))
        kind = said[step["kind"]][2]
        assert len(notes) == (kind is not None) and all(note in n for n in notes), (*where, notes)
        assert ("lambda" in "".join(notes)) == (kind == "lambda"), (*where, notes)  # the EM notes name what only the app quotes
        for p in written:  # no step shows another step's sentences
            assert p not in seen, (*where, "also on", seen.get(p))
            seen[p] = step["key"]
        if step["kind"] not in ("lab", "primary", "votes"):
            assert page.locator("#step-figure canvas, #step-figure svg, #step-figure .chart").count() > 0, where
        page.screenshot(path=str(shots / f"site-tour-drawing-{tag}-step{k}.png"), full_page=True)


def test_the_em_views_iteration_is_in_the_link_and_an_odd_one_is_said(browser, url):  # noqa: F811
    ctx, page = open_site(browser, url, "?view=em&image=2&t=1")
    try:
        assert page.input_value("#em-t") == "1" and page.inner_text("#em-hist-title").startswith("Iteration 1 of")
        page.evaluate("(() => { const s = document.getElementById('em-t'); s.value = '2'; s.dispatchEvent(new Event('input')); })()")
        page.wait_for_function("location.search.includes('t=2') && location.search.includes('view=em')")
        page.click("#em-tour")
        page.wait_for_function("location.search.includes('tour=em') && location.search.includes('view=tour')")
        assert page.inner_text("#step-title") == "The input" and page.input_value("#tour-of") == "matrix-small-mnist.safetensors"
    finally:
        ctx.close()
    ctx, page = open_site(browser, url, "?view=em&t=9&iterations=5")
    try:
        said = page.inner_text("#status")
        assert "t=9" in said and "iterations=5" in said and "its own 2 iterations" in said
        assert page.input_value("#em-t") == "2"
    finally:
        ctx.close()
