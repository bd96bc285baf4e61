"""The static site's playground asks the app's question before its figure (web/js/toyask.js), in real
chromium at phone width: the question, its choices, the verdict and the reveal's reason are the
app's (capsviz.analysis.questions.routed_split on the app's own toy of the same points), the figure
waits for the answer, the answer stays in the browser and holds while the points move, a new lower
capsule asks again; in Japanese too.

Needs npm (the registry, for the pinned front-end packages) and the real MNIST test set."""

import json

import numpy as np
import pytest
from test_site_browser import mnist, open_site, site, url  # noqa: F401  (fixtures)

from capsviz.analysis.playground import attention_toy, dynamic_toy
from capsviz.analysis.questions import routed_split
from capsviz.i18n import speaking

pytestmark = pytest.mark.e2e
WIDTH = 390


def apps_question(site, preset: str, J: int, T: int, lower: int, rule: str = "dynamic"):  # noqa: F811
    """The app's question on the site's preset points (the manifest's), routed by the app's toy."""
    points = np.array(json.loads((site / "site.json").read_text())["playground"]["presets"][preset])[:, :J]
    toy = dynamic_toy(points, T) if rule == "dynamic" else attention_toy(points)
    return routed_split(toy, lower, (rule, preset, J, T), attention=rule != "dynamic")


def choices(page) -> dict:
    """The question's choices on the page: key -> label."""
    return page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#toy-ask .ask-choice')].map((l) => [l.querySelector('input').value, l.textContent.trim()]))"
    )


def test_the_playground_asks_the_apps_question_before_its_figure_at_phone_width(browser, site, url, shots):  # noqa: F811
    q = apps_question(site, "outliers", 3, 3, 4)
    ctx, page = open_site(browser, url, "?view=playground&preset=outliers&J=3&T=3&cap=5&rule=dynamic&ask=1", width=WIDTH, height=1000)
    try:
        page.wait_for_function("!document.getElementById('toy-ask').hidden")
        assert page.locator("#toy-body").is_hidden()  # the couplings wait for the answer
        said = page.inner_text("#toy-ask")
        assert str(q.text) in said
        assert choices(page) == {k: q.label(k) for k in q.keys}
        assert page.locator("#toy-ask #ask-commit").is_disabled()
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
        page.screenshot(path=str(shots / "site-playground-question-390.png"), full_page=True)
        wrong = next(k for k in q.keys if k != q.answer)
        page.check(f"#toy-ask input[value='{wrong}']")
        page.fill("#toy-ask #ask-reason", "the outlier points away")
        page.click("#toy-ask #ask-commit")
        page.wait_for_function("!document.getElementById('toy-body').hidden && document.querySelectorAll('#toy-table tr').length === 8")
        said = page.inner_text("#toy-ask")
        assert q.verdict(wrong) in said and str(q.why) in said, said
        page.screenshot(path=str(shots / "site-playground-verdict-390.png"), full_page=True)
        kept = page.evaluate("JSON.parse(localStorage.getItem('capsviz-answers'))")
        (qid,) = [k for k in kept if k.startswith("split:")]
        assert kept[qid]["choice"] == wrong and kept[qid]["reason"] == "the outlier points away"
        # answered: the points move the figure freely, the verdict stays
        page.fill("#cap-inputs input >> nth=0", "1.9")
        page.dispatch_event("#cap-inputs input >> nth=0", "change")
        page.wait_for_function("location.search.includes('pts=')")
        assert page.locator("#toy-body").is_visible() and q.verdict(wrong) in page.inner_text("#toy-ask")
        # another lower capsule: a new question about the points as they are, the figure hidden again
        page.select_option("#cap", "2")
        page.wait_for_function("document.getElementById('toy-body').hidden")
        points = np.array(page.evaluate("window.capsviz.state.toy.pts"), np.float64).reshape(6, 3, 2)[:, :3]
        again = routed_split(dynamic_toy(points, 3), 1, ("dynamic", "outliers", 3, 3))
        assert str(again.text) in page.inner_text("#toy-ask") and choices(page) == {k: again.label(k) for k in again.keys}
        page.click("#toy-ask #ask-skip")
        page.wait_for_function("!document.getElementById('toy-body').hidden")
        assert again.verdict(None) in page.inner_text("#toy-ask") and str(again.why) in page.inner_text("#toy-ask")
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()


def test_the_question_in_japanese_and_for_self_attention(browser, site, url, shots):  # noqa: F811
    with speaking("ja"):
        q = apps_question(site, "agreeing cluster", 2, 1, 0, rule="self-attention")
        text, labels, verdict, why = str(q.text), {k: q.label(k) for k in q.keys}, q.verdict(q.answer), str(q.why)
    ctx, page = open_site(
        browser, url, "?view=playground&preset=agreeing+cluster&J=2&cap=1&rule=self-attention&ask=1&lang=ja", width=WIDTH, height=1000
    )
    try:
        page.wait_for_function("!document.getElementById('toy-ask').hidden")
        assert text in page.inner_text("#toy-ask") and choices(page) == labels
        page.check(f"#toy-ask input[value='{q.answer}']")
        page.click("#toy-ask #ask-commit")
        page.wait_for_function("!document.getElementById('toy-body').hidden")
        assert verdict in page.inner_text("#toy-ask") and why in page.inner_text("#toy-ask")
        assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
        page.screenshot(path=str(shots / "site-playground-ja-390.png"), full_page=True)
        assert not page.outside and not page.errors, (page.outside, page.errors)
    finally:
        ctx.close()
