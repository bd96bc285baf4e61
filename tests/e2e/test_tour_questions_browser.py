"""The guided tour in chromium as a student meets it (issue 54, items 1 and 2; issue 50, item 1):
on a phone (390 px) and projected (1920x1080, ?projector=1), every step that shows a result waits
for a prediction, the reveal says why, and the last step says which predictions were right with a
way back to each missed one; the chapter "Why capsules" comes first. And the tour's two page links
read whole at 390 px in Chinese and Japanese. Screenshots of a question, a reveal and the summary
go to the `shots` folder."""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect
from st_helpers import new_page, outward_address, start_streamlit, stop_streamlit, wait_for_app_run
from test_browser import no_exceptions, open_page

from capsviz.i18n import speaking, t

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
TOUR = "A guided tour of a capsule network"
MODEL = "efficient-capsnet-mnist.safetensors"  # the chapter's three steps, then eight of its own
STEPS = 3 + 8 + 1  # and "Where I stand"


@pytest.fixture(scope="module")
def class_of_shipped(tmp_path_factory):
    """The shipped models and the real test set, served on every interface: opened by the
    machine's network address, a browser here is a student."""
    data = ROOT.parent / "shared" / "data"
    if not (data / "mnist").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the real data at {data}")
        pytest.skip("real data not present (../shared/data)")
    address = outward_address()
    if address is None:
        pytest.skip("this machine has no network address besides loopback")
    folder = tmp_path_factory.mktemp("tour-class")
    models = folder / "checkpoints"  # a folder of its own: the class's store and identities are written beside the models
    models.mkdir()
    for f in (ROOT / "checkpoints").glob("*.safetensors"):
        (models / f.name).symlink_to(f)
    (models / "sweeps").symlink_to(ROOT / "checkpoints" / "sweeps")
    env = {"CAPSVIZ_CHECKPOINTS": str(models), "CAPSVIZ_DATA_DIR": str(data), "XDG_CACHE_HOME": str(folder / "cache")}
    proc, url = start_streamlit(env, folder / "server.log", address="0.0.0.0")
    port = url.rsplit(":", 1)[1]
    yield f"http://{address}:{port}"
    stop_streamlit(proc)


def step_is(page, k: int, n: int = STEPS) -> None:
    expect(page.get_by_text(re.compile(rf"^Step {k} of {n}:"))).to_be_visible()
    wait_for_app_run(page)


def answer_first_choice(page) -> None:
    """Pick the question's first choice and commit it; wait for the reveal's verdict."""
    page.get_by_role("radiogroup", name="Your answer").get_by_test_id("stRadioOption").first.click()
    page.get_by_role("button", name="Commit my answer").click()
    expect(page.get_by_text(re.compile(r"^(Right|Not this time)")).first).to_be_visible()
    wait_for_app_run(page)


def asked(page) -> bool:
    return page.get_by_text("Predict first.", exact=False).count() > 0


def test_a_student_predicts_every_step_on_a_phone_and_sees_where_they_stand(browser, class_of_shipped, shots):
    phone = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = new_page(phone)
        open_page(page, f"{class_of_shipped}/?model={MODEL}", TOUR)
        step_is(page, 1)
        expect(page.get_by_text("Why capsules: invariance against equivariance")).to_be_visible()
        expect(page.get_by_test_id("stPlotlyChart")).to_have_count(0)  # the chapter's charts wait for the prediction
        page.get_by_role("button", name="Skip: just show me").scroll_into_view_if_needed()  # the question and all its choices
        page.screenshot(path=str(shots / "tour-question-390.png"))
        questions = 0
        for k in range(1, STEPS):
            step_is(page, k)
            if asked(page):
                expect(page.get_by_role("button", name="Commit my answer")).to_be_disabled()
                answer_first_choice(page)
                questions += 1
                if k == 1:
                    expect(page.get_by_test_id("stPlotlyChart").first).to_be_visible()
                    page.get_by_text(re.compile(r"^(Right|Not this time)")).first.scroll_into_view_if_needed()
                    page.screenshot(path=str(shots / "tour-reveal-390.png"))
            page.get_by_role("button", name="Next").click()
        step_is(page, STEPS)
        expect(page.get_by_text("Where I stand").first).to_be_visible()
        summary = page.get_by_text(re.compile(r"^You got \d+ of \d+ questions? right"))
        expect(summary).to_be_visible()
        right, total = map(int, re.match(r"You got (\d+) of (\d+)", summary.inner_text()).groups())
        assert total == questions == 8  # the chapter's three, primary, predictions, routing, lengths, the lab
        backs = page.get_by_role("button", name=re.compile(r"^Open step \d+$"))
        expect(backs).to_have_count(total - right)
        summary.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "tour-summary-390.png"))
        no_exceptions(page)
        if total > right:  # a missed step is one click away, revealed as answered
            first = backs.first.inner_text()
            backs.first.click()
            step_is(page, int(first.rsplit(" ", 1)[1]))
            expect(page.get_by_text(re.compile(r"^Not this time")).first).to_be_visible()
        no_exceptions(page)
    finally:
        phone.close()


def test_a_question_a_reveal_and_the_summary_projected(browser, class_of_shipped, shots):
    room = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        page = new_page(room)
        open_page(page, f"{class_of_shipped}/?model={MODEL}&projector=1&step=2", TOUR)
        step_is(page, 2)
        expect(page.get_by_text("Predict first.", exact=False)).to_be_visible()
        size = page.get_by_text("Predict first.", exact=False).evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
        assert size >= 20, size  # read from the back of the room
        page.get_by_role("button", name="Skip: just show me").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "tour-question-1920.png"))
        answer_first_choice(page)
        expect(page.get_by_test_id("stPlotlyChart").first).to_be_visible()
        page.get_by_text(re.compile(r"^(Right|Not this time)")).first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "tour-reveal-1920.png"))
        page.get_by_test_id("stPlotlyChart").first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "tour-reveal-figure-1920.png"))
        page.goto(f"{class_of_shipped}/?model={MODEL}&projector=1&step={STEPS}")  # the same student, after a reload
        step_is(page, STEPS)
        expect(page.get_by_text(re.compile(r"^You got [01] of 8 questions right; 7 of them"))).to_be_visible()
        page.screenshot(path=str(shots / "tour-summary-1920.png"))
        no_exceptions(page)
    finally:
        room.close()


@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_the_tours_page_links_read_whole_on_a_phone(browser, server, shots, lang):
    phone = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = new_page(phone)
        page.goto(f"{server['url']}/?lang={lang}&model=tiny-capsnet.safetensors")
        wait_for_app_run(page)
        with speaking(lang):
            labels = [t("Glossary"), t("Why capsules")]
        main = page.get_by_test_id("stMain")
        for label in labels:
            link = main.get_by_test_id("stPageLink").filter(has_text=label).first
            expect(link).to_be_visible()
            text = link.locator("p, span").last
            assert text.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), f"{label!r} is cut off"
            assert text.inner_text().strip() == label
        page.screenshot(path=str(shots / f"tour-links-390-{lang}.png"))
        no_exceptions(page)
    finally:
        phone.close()
