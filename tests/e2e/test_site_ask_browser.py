"""The static site asks the app's questions before it shows the answer (capsviz.site.quiz), in real
chromium: the explorer's figures wait for a committed or skipped answer, the verdict and the reason
are the app's, a student's answers stay in that browser (they survive a reload, and a link with
ask=0 leaves the questions out), in each language, at phone and laptop width.

Needs npm (the registry, for the pinned front-end packages) and the real MNIST test set."""

import gzip
import json

import pytest
from test_site_browser import mnist, open_site, site, url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e
SMALL = "capsnet-small-mnist.safetensors"


def asked(site, model: str, lang: str) -> list:  # noqa: F811
    manifest = json.loads((site / "site.json").read_text())
    m = next(x for x in manifest["models"] if x["name"] == model)
    return json.loads(gzip.decompress((site / m["questions"]["files"][lang]).read_bytes()))


@pytest.mark.parametrize("width", [390, 1280])
def test_the_explorer_waits_for_an_answer_then_says_the_apps_verdict(browser, site, url, shots, width):  # noqa: F811
    q = asked(site, SMALL, "en")[2]
    ctx, page = open_site(browser, url, f"?view=explore&model={SMALL}&image=2&ask=1", width=width, height=1000)
    try:
        assert page.locator("#ask").is_visible() and page.locator("#explore-body").is_hidden()
        assert q["text"] in page.inner_text("#ask") and page.locator("#ask input[type=radio]").count() == len(q["keys"])
        assert page.locator("#ask-commit").is_disabled()
        assert page.inner_text("#label").endswith("(its true class is shown once you answer).")  # the answer's hint waits too
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
        page.screenshot(path=str(shots / f"site-ask-question-{width}.png"), full_page=True)
        page.check(f"#ask input[value='{q['answer']}']")
        page.fill("#ask-reason", "its top stroke")
        page.click("#ask-commit")
        page.wait_for_function("!document.getElementById('explore-body').hidden")
        said = page.inner_text("#ask")
        assert q["verdicts"][q["answer"]] in said and q["why"] in said and "nothing is sent" in said
        assert "(true class: " in page.inner_text("#label")
        page.wait_for_function("document.querySelector('#lengths svg') !== null")
        page.screenshot(path=str(shots / f"site-ask-verdict-{width}.png"), full_page=True)
        kept = page.evaluate("JSON.parse(localStorage.getItem('capsviz-answers'))")
        assert kept[q["qid"]]["choice"] == q["answer"] and kept[q["qid"]]["reason"] == "its top stroke"
        page.reload()  # the answer stays in this browser: the view opens with its verdict
        page.evaluate("window.capsviz.ready")
        assert page.locator("#explore-body").is_visible() and q["verdicts"][q["answer"]] in page.inner_text("#ask")
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()


def test_a_skip_a_wrong_answer_another_language_a_pair_and_ask_0(browser, site, url):  # noqa: F811
    ctx, page = open_site(browser, url, f"?view=explore&model={SMALL}&image=5&ask=1")
    try:
        q = asked(site, SMALL, "en")[5]
        page.click("#ask-skip")
        page.wait_for_function("!document.getElementById('explore-body').hidden")
        assert q["verdicts"][""] in page.inner_text("#ask")
        wrong = next(k for k in q["keys"] if k != q["answer"])
        page.fill("#image", "6")
        page.press("#image", "Enter")
        q6 = asked(site, SMALL, "en")[6]
        page.wait_for_function(
            f"document.getElementById('ask').textContent.includes({json.dumps(q6['text'])}) && document.getElementById('explore-body').hidden"
        )
        wrong = next(k for k in q6["keys"] if k != q6["answer"])
        page.check(f"#ask input[value='{wrong}']")
        page.click("#ask-commit")
        page.wait_for_function("!document.getElementById('explore-body').hidden")
        assert q6["verdicts"][wrong] in page.inner_text("#ask")
    finally:
        ctx.close()
    ja = asked(site, SMALL, "ja")[0]
    ctx, page = open_site(browser, url, f"?view=explore&model={SMALL}&image=0&ask=1&lang=ja")
    try:
        assert ja["text"] in page.inner_text("#ask") and ja["labels"][0] in page.inner_text("#ask")
    finally:
        ctx.close()
    pairs = asked(site, "capsnet-small-multimnist.safetensors", "en")[0]
    ctx, page = open_site(browser, url, "?view=explore&model=capsnet-small-multimnist.safetensors&image=0&ask=1")
    try:
        assert pairs["text"] in page.inner_text("#ask") and page.locator("#ask input[type=radio]").count() == 3
    finally:
        ctx.close()
    ctx, page = open_site(browser, url, f"?view=explore&model={SMALL}&image=0&ask=0")
    try:
        assert page.locator("#ask").is_hidden() and page.locator("#explore-body").is_visible()
        page.wait_for_function("location.search.includes('ask=0')")  # the link keeps it
    finally:
        ctx.close()


def test_a_tour_step_asks_its_question_before_it_shows(browser, site, url, shots):  # noqa: F811
    manifest = json.loads((site / "site.json").read_text())
    m = next(x for x in manifest["models"] if x["name"] == SMALL)
    steps = json.loads(gzip.decompress((site / m["explained"]["files"]["en"]).read_bytes()))[0]
    k, step = next((k, s) for k, s in enumerate(steps, 1) if s["question"])
    q = step["question"]
    ctx, page = open_site(browser, url, f"?view=tour&model={SMALL}&image=0&step={k}&ask=1", width=390, height=1000)
    try:
        assert page.locator("#tour-ask").is_visible() and page.locator("#step-body").is_hidden()
        assert q["text"] in page.inner_text("#tour-ask")
        page.screenshot(path=str(shots / "site-ask-tour-390.png"), full_page=True)
        page.check(f"#tour-ask input[value='{q['answer']}']")
        page.click("#ask-commit")
        page.wait_for_function("!document.getElementById('step-body').hidden")
        assert q["verdicts"][q["answer"]] in page.inner_text("#tour-ask") and step["text"][0][:40].replace("*", "") in page.inner_text(
            "#step-text"
        ).replace("*", "")
        assert not page.errors, page.errors
    finally:
        ctx.close()
