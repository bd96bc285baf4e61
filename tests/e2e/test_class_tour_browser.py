"""A class's tour in chromium (issue 54): 29 students at the protocol level (tests/test_class_live.py)
and one in chromium on a phone (390 px) answer the guided tour's questions; the teacher, on the
server's own machine, projects the Teacher page (1920x1080, ?projector=1) with the 30 students'
counts and reveals a question; the chromium student then sees the class's split. Screenshots of
the question before the answer, its reveal, the revealed split, "Where I stand" and the projected
Teacher page go to the `shots` folder."""

import asyncio
import os
import re
import urllib.parse
from collections import Counter
from pathlib import Path

import pytest
from playwright.sync_api import expect
from st_helpers import new_page, outward_address, run_async, start_streamlit, stop_streamlit, wait_for_app_run
from test_browser import no_exceptions, open_page
from test_class_live import IMAGE, MODEL, QUESTIONS, STEPS, Pupil, protocol

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
TOUR = "A guided tour of a capsule network"
LINK = urllib.parse.urlencode({"model": MODEL, "image": IMAGE})


@pytest.fixture(scope="module")
def class_server(tmp_path_factory):
    """The shipped models (in a folder of their own: the class's store is written beside them) and
    the real test set, served on every interface: (the students' address, the teacher's)."""
    data = ROOT.parent / "shared" / "data"
    if not (data / "mnist").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the real data at {data}")
        pytest.skip("real data not present (../shared/data)")
    address = outward_address()
    if address is None:
        pytest.skip("this machine has no network address besides loopback")
    folder = tmp_path_factory.mktemp("class-tour")
    models = folder / "checkpoints"
    models.mkdir()
    for f in (ROOT / "checkpoints").glob("*.safetensors"):
        (models / f.name).symlink_to(f)
    (models / "sweeps").symlink_to(ROOT / "checkpoints" / "sweeps")
    env = {"CAPSVIZ_CHECKPOINTS": str(models), "CAPSVIZ_DATA_DIR": str(data), "XDG_CACHE_HOME": str(folder / "cache")}
    proc, url = start_streamlit(env, folder / "server.log", address="0.0.0.0")
    yield f"http://{address}:{url.rsplit(':', 1)[1]}", url
    stop_streamlit(proc)


def test_a_class_answers_the_tour_and_the_teacher_projects_its_counts(browser, class_server, shots):
    students, teachers = class_server
    stats = protocol.Stats()
    pupils = [Pupil(k, students, stats) for k in range(29)]
    asked: dict = {}

    async def lesson():
        try:
            await asyncio.gather(*(p.lesson(0.2 * k, asked) for k, p in enumerate(pupils)))
        finally:
            await asyncio.gather(*(p.leave() for p in pupils), return_exceptions=True)

    run_async(lesson())
    assert len(asked) == QUESTIONS
    first = min(asked, key=lambda q: asked[q][0])

    phone = browser.new_context(viewport={"width": 390, "height": 844})
    room = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        student = new_page(phone)
        open_page(student, f"{students}/?{LINK}", TOUR)
        expect(student.get_by_text("Predict first.", exact=False)).to_be_visible()
        student.get_by_text("Predict first.", exact=False).evaluate(
            "e => e.scrollIntoView({block: 'center'})"
        )  # the question and its choices
        student.screenshot(path=str(shots / "class-tour-question-390.png"))
        option = student.get_by_role("radiogroup", name="Your answer").get_by_test_id("stRadioOption").first
        mine = option.inner_text().strip()
        option.click()
        student.get_by_role("button", name="Commit my answer").click()
        verdict = student.get_by_text(re.compile(r"^(Right|Not this time)")).first
        expect(verdict).to_be_visible()
        wait_for_app_run(student)
        verdict.scroll_into_view_if_needed()
        student.screenshot(path=str(shots / "class-tour-reveal-390.png"))

        teacher = new_page(room)
        open_page(teacher, f"{teachers}/teacher?projector=1", "Teacher")
        expect(teacher.get_by_test_id("stMetricValue").first).to_have_text("30")
        answers = Counter(p.sent[first, 1] for p in pupils if p.sent[first, 1] is not None)
        answers[mine] += 1
        n = sum(answers.values())
        expect(teacher.get_by_text(f"{n} students answered in round 1; the students do not see", exact=False).first).to_be_visible()
        tables = teacher.get_by_test_id("stTable")
        expect(tables).to_have_count(1)  # the pages the students are on; projected, no split and no right answer before the reveal
        teacher.get_by_role("heading", name="Questions").scroll_into_view_if_needed()
        teacher.screenshot(path=str(shots / "class-teacher-projected-1920.png"))
        teacher.get_by_role("button", name="Reveal to the students").first.click()
        expect(teacher.get_by_text(f"{n} students answered in round 1; the students see", exact=False).first).to_be_visible()
        wait_for_app_run(teacher)
        expect(tables).to_have_count(2)
        table = tables.last  # the revealed question's split, the right answer marked
        for label, count in answers.items():
            expect(table.get_by_role("row").filter(has_text=label).get_by_role("cell").last).to_have_text(str(count))
        size = table.locator("td").first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
        assert size >= 20, size  # read from the back of the room
        teacher.get_by_role("heading", name="Questions").scroll_into_view_if_needed()
        teacher.screenshot(path=str(shots / "class-teacher-projected-revealed-1920.png"))
        no_exceptions(teacher)

        student.reload()  # the same student: its answer is kept, and the class's split is now shown
        wait_for_app_run(student)
        split = student.get_by_text(f"How the class answered: {n} students answered.", exact=False)
        expect(split).to_be_visible()
        said = split.inner_text().replace("\u200b", "")  # the zero-width space that keeps a colon from starting an emoji code
        for label, count in answers.items():
            assert f"{label}: {count}" in said, (label, count, said)
        split.scroll_into_view_if_needed()
        student.screenshot(path=str(shots / "class-tour-split-390.png"))

        student.goto(f"{students}/?{LINK}&step={STEPS}")
        wait_for_app_run(student)
        summary = student.get_by_text(re.compile(rf"^You got [01] of {QUESTIONS} questions right; {QUESTIONS - 1} of them"))
        expect(summary).to_be_visible()
        summary.scroll_into_view_if_needed()
        student.screenshot(path=str(shots / "class-tour-summary-390.png"))
        no_exceptions(student)
    finally:
        phone.close()
        room.close()
