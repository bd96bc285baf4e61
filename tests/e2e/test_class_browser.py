"""Issue 54 in chromium: a student's browser keeps the identity the server signed (a made-up
cookie is replaced), answers the playground's question before its figure shows (at a phone's
390 px), and the teacher's page counts them (projected, 1920x1080)."""

import pytest
from playwright.sync_api import expect
from st_helpers import new_page, outward_address, start_streamlit, stop_streamlit
from test_browser import no_exceptions, open_page

from capsviz import access

pytestmark = pytest.mark.e2e


@pytest.fixture
def class_server(tmp_path_factory, app_env):
    """A server on every interface: opened by the machine's network address, a browser here is a
    student; by 127.0.0.1, the teacher."""
    address = outward_address()
    if address is None:
        pytest.skip("this machine has no network address besides loopback")
    log = tmp_path_factory.mktemp("class") / "server.log"
    proc, url = start_streamlit(app_env, log, address="0.0.0.0")
    port = url.rsplit(":", 1)[1]
    yield {"student": f"http://{address}:{port}", "teacher": url, "log": log}
    stop_streamlit(proc)


def identity_cookie(ctx) -> str | None:
    return next((c["value"] for c in ctx.cookies() if c["name"] == access.ID_COOKIE), None)


def test_a_student_predicts_then_sees_and_the_teacher_counts_it(browser, class_server, shots):
    phone = browser.new_context(viewport={"width": 390, "height": 844})
    forged = browser.new_context(viewport={"width": 1280, "height": 900})
    projector = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        student = new_page(phone)
        open_page(student, class_server["student"] + "/playground", "Routing playgrounds")
        expect(student.get_by_text("Predict first.", exact=False)).to_be_visible()
        expect(student.get_by_text("The numbers at iteration", exact=False)).to_have_count(0)  # the figure waits
        expect(student.get_by_role("button", name="Commit my answer")).to_be_disabled()
        student.get_by_text("Predict first.", exact=False).scroll_into_view_if_needed()
        student.screenshot(path=str(shots / "class-question-390.png"))
        cookie = identity_cookie(phone)
        assert cookie and len(cookie) == access.ID_HEX + 1 + access.SIGNATURE_HEX  # minted, signed, kept by the browser

        student.get_by_text("Still split about evenly (near uniform)", exact=True).click()
        student.get_by_role("button", name="Commit my answer").click()
        expect(student.get_by_text("The numbers at iteration", exact=False).first).to_be_visible()
        student.get_by_text("Predict first.", exact=False).scroll_into_view_if_needed()
        student.screenshot(path=str(shots / "class-reveal-390.png"))
        student.reload()  # the same student: the answer is theirs, the figure shows at once
        expect(student.get_by_text("The numbers at iteration", exact=False).first).to_be_visible()
        assert identity_cookie(phone) == cookie
        no_exceptions(student)

        forged.add_cookies([{"name": access.ID_COOKIE, "value": "0123456789abcdef." + "0" * 32, "url": class_server["student"]}])
        other = new_page(forged)
        open_page(other, class_server["student"] + "/playground", "Routing playgrounds")
        expect(other.get_by_role("button", name="Commit my answer")).to_be_visible()  # not anybody's answer: asked afresh
        other.wait_for_function(f"document.cookie.indexOf('{access.ID_COOKIE}=0123456789abcdef.') < 0")  # replaced

        teacher = new_page(projector)
        open_page(teacher, class_server["teacher"] + "/teacher", "Teacher")
        expect(teacher.get_by_test_id("stMetricValue").first).to_have_text("2")  # the two browsers, each once
        expect(teacher.get_by_text("1 student answered in round 1", exact=False)).to_be_visible()
        teacher.screenshot(path=str(shots / "class-teacher-1920.png"))
        no_exceptions(teacher)
    finally:
        phone.close()
        forged.close()
        projector.close()


def test_the_teacher_page_of_a_class_on_its_own_images_reads_at_a_glance(browser, app_env, tmp_path_factory, shots):
    """200 questions of one student each (a class each on its own images) and one the class
    shared: projected in Chinese, the shared question is drawn whole and the others are one row a
    page, in the reader's language."""
    import numpy as np

    from capsviz import store
    from capsviz.analysis import questions
    from capsviz.analysis.playground import DYNAMIC_PRESETS, dynamic_toy

    folder = tmp_path_factory.mktemp("class-models")
    for f in __import__("pathlib").Path(app_env["CAPSVIZ_CHECKPOINTS"]).glob("*.safetensors"):
        (folder / f.name).symlink_to(f)
    s = store.Store(folder)
    rng = np.random.default_rng(5)
    for k in range(200):
        scores = rng.random(10)
        q = questions.longest_capsule("m", rng.random((28, 28)), scores, int(scores.argmax()), [str(d) for d in range(10)])
        text, labels = q.kept()
        s.answer(q.qid, q.page, text, q.keys, labels, q.answer, f"{k:016x}", q.keys[k % len(q.keys)])
    q = questions.uniform_changes_winner(dynamic_toy(DYNAMIC_PRESETS[next(iter(DYNAMIC_PRESETS))][:, :2], 3), ("shared",))
    text, labels = q.kept()
    for k in range(25):
        s.answer(q.qid, q.page, text, q.keys, labels, q.answer, f"{1000 + k:016x}", q.keys[k % 2])
    s.close()
    log = tmp_path_factory.mktemp("class-teacher") / "server.log"
    proc, url = start_streamlit({**app_env, "CAPSVIZ_CHECKPOINTS": str(folder)}, log)
    projector = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        teacher = new_page(projector)
        open_page(teacher, url + "/teacher?lang=zh-Hans", "教师")
        expect(teacher.get_by_text("第 1 轮有 25 名学生作答", exact=False)).to_be_visible()
        more = teacher.get_by_text("另外 189 个问题", exact=False)
        expect(more).to_be_visible()
        more.scroll_into_view_if_needed()
        expect(teacher.get_by_text("答对数", exact=True)).to_be_visible()
        assert teacher.locator("[class*=st-key-teacher_reveal_]").count() == 12
        teacher.screenshot(path=str(shots / "class-teacher-many-zh-1920.png"))
        no_exceptions(teacher)
    finally:
        projector.close()
        stop_streamlit(proc)
