"""Who may do what on a served class (capsviz.access), tried as students would: through the
Train page (AppTest), with a person other than the teacher, a second tab or a reload of one
student, look-alike names and someone else's model."""

import json

import pytest
import streamlit as st
import test_app
import test_train_page as ttp
from streamlit.testing.v1 import AppTest

import pages.classroom
from capsviz import access, jobs

APP = test_app.APP
app, queue, router_mode = test_app.app, ttp.queue, test_app.router_mode
QUICK, LONG, start, texts, buttons = ttp.QUICK, ttp.LONG, ttp.start, ttp.texts, ttp.buttons


def test_a_browser_is_one_student_by_the_identity_the_server_signed(tmp_path):
    who, cookie = access.mint(tmp_path, "10.0.0.7")
    assert len(who) == 16 and cookie.startswith(who + ".")
    assert access.identity(tmp_path, {access.ID_COOKIE: cookie}) == who  # every tab, every reload, every replica
    assert access.identity(tmp_path, {}) is None and access.identity(tmp_path, None) is None


@pytest.mark.parametrize(
    "peer, forwarded, local",
    [
        (None, [], True),  # Streamlit says None for a loopback connection
        ("127.0.0.1", [], True),
        ("::1", [], True),
        ("10.0.0.7", [], False),
        ("10.0.0.7", ["127.0.0.1"], False),  # a remote browser claiming to be local
        (None, ["10.0.0.7"], False),  # behind the replicas' nginx: the browser is elsewhere
        (None, ["127.0.0.1, 10.0.0.7"], False),  # a forged first value, nginx's own last
        (None, ["127.0.0.1"], True),  # a browser on the server's machine, through nginx
    ],
)
def test_only_a_browser_on_the_servers_machine_is_local(peer, forwarded, local):
    assert (access.client_address(peer, forwarded) == access.LOCAL) is local


def test_the_teacher_key_is_made_once_and_shared_by_the_servers_processes(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CAPSVIZ_TEACHER_KEY", raising=False)
    key = access.teacher_key(tmp_path)
    assert len(key) >= 12 and access.teacher_key(tmp_path) == key
    assert (tmp_path / access.KEY_FILE).stat().st_mode & 0o077 == 0  # the server's user alone reads it
    assert access.key_matches(tmp_path, key) and not access.key_matches(tmp_path, key[:-1]) and not access.key_matches(tmp_path, "")
    monkeypatch.setenv("CAPSVIZ_TEACHER_KEY", "set-by-the-host")
    assert access.teacher_key(tmp_path) == "set-by-the-host"
    monkeypatch.setattr(access, "_printed", False)
    access.announce(tmp_path)
    access.announce(tmp_path)
    assert capsys.readouterr().err.count("capsviz: teacher key set-by-the-host") == 1  # once per process, in its log


def test_students_explore_only_unless_the_teacher_allows_more(tmp_path, monkeypatch):
    monkeypatch.delenv("CAPSVIZ_STUDENTS", raising=False)
    assert access.settings(tmp_path) == {"students": "explore"}
    assert access.may_train(tmp_path, teacher=True) and not access.may_train(tmp_path, teacher=False)
    monkeypatch.setenv("CAPSVIZ_STUDENTS", "train")
    assert access.may_train(tmp_path, teacher=False)
    access.set_student_mode(tmp_path, "explore")  # the teacher's choice in the folder wins over the host's default
    assert not access.may_train(tmp_path, teacher=False)
    (tmp_path / access.SETTINGS_FILE).write_text("[not settings")
    assert access.settings(tmp_path) == {"students": "train"}


def test_a_model_is_its_trainers_and_the_teachers(tmp_path):
    (tmp_path / "teachers.safetensors").write_bytes(b"x")
    access.claim(tmp_path, "mine", "ann", teacher=False)
    assert access.owners(tmp_path) == {"mine": "ann"}
    assert access.may_write(tmp_path, "mine", "ann", False) is None
    assert "another student's" in access.may_write(tmp_path, "mine", "bob", False)
    assert "the teacher's" in access.may_write(tmp_path, "teachers", "bob", False)
    with pytest.raises(PermissionError):
        access.claim(tmp_path, "mine", "bob", teacher=False)
    access.claim(tmp_path, "mine", "teacher-browser", teacher=True)  # the teacher takes it over
    assert access.owners(tmp_path) == {} and "the teacher's" not in (access.may_write(tmp_path, "mine", "ann", False) or "")
    (tmp_path / access.OWNERS_FILE).write_text(json.dumps({"x": 3, "y": "bob"}))
    assert access.owners(tmp_path) == {"y": "bob"}


NEXT = []  # who the next new session is: (id, teacher)


@pytest.fixture
def as_person(monkeypatch):
    """pages.common.person answering for each AppTest session as `student` made it: an AppTest
    sends no cookies and runs on no connection."""

    def person():
        if "as" not in st.session_state:
            st.session_state["as"] = NEXT.pop()
        who, teacher = st.session_state["as"]
        st.session_state["capsviz_teacher"] = teacher
        return who, teacher

    monkeypatch.setattr(pages.classroom, "person", person)


def student(who, teacher=False):
    """A new session (a tab, or a reload) of the browser of `who`."""
    at = AppTest.from_file(APP, default_timeout=60)
    NEXT.append((who, teacher))
    at.switch_page("pages/train.py").run()
    assert not at.exception, at.exception
    return at


def test_a_student_of_an_explore_only_class_cannot_train(app, queue, as_person, monkeypatch):
    monkeypatch.delenv("CAPSVIZ_STUDENTS", raising=False)
    ann = student("ann")
    assert any("students explore the models" in i.value for i in ann.info)
    assert ann.button(key="start_training").disabled
    ttp.fill(ann, name="mine", **QUICK).run()
    ann.selectbox(key="t_dataset").set_value("your own images (zip)").run()
    assert not ann.get("file_uploader") and any("off on this server" in c.value for c in ann.caption)
    assert queue.latest("ann") is None


def test_students_keep_their_models_and_their_runs(app, queue, as_person, monkeypatch):
    monkeypatch.setenv("CAPSVIZ_STUDENTS", "train")
    ann = student("ann")
    start(ann, "mine")
    assert jobs.wait(queue.latest("ann"), 60).state == "finished"
    ann.run()
    assert any("Finished: saved mine.safetensors at " in s.value for s in ann.success)  # told when, after any reload
    before = (app.folder / "mine.safetensors").read_bytes()

    bob = student("bob")
    start(bob, "mine")  # another student's model
    assert "another student's model" in bob.error[0].value and queue.latest("bob") is None
    start(bob, "tiny-capsnet")  # the teacher's
    assert "the teacher's model" in bob.error[0].value
    start(bob, "mіne")  # Cyrillic i: looks the same
    assert "looks like mine" in bob.error[0].value
    assert "confirm_replace" not in buttons(bob) and queue.latest("bob") is None
    assert (app.folder / "mine.safetensors").read_bytes() == before

    start(ann, "mine")  # her own: asked first, then replaced
    assert "already exists" in ann.warning[0].value
    teacher = student("teacher-browser", teacher=True)
    start(teacher, "mine")
    assert "trained by a student" in teacher.warning[0].value and "confirm_replace" in buttons(teacher)


def test_a_reload_or_another_tab_keeps_control_of_ones_run(app, queue, as_person, monkeypatch):
    monkeypatch.setenv("CAPSVIZ_STUDENTS", "train")
    first_tab = student("ann")
    start(first_tab, "long", **LONG)
    run = queue.latest("ann")
    ttp.wait_until(lambda: run.snapshot().step > 0)
    reloaded = student("ann")  # a new session of the same browser
    assert "Your run" in texts(reloaded, "subheader") and "stop_training" in buttons(reloaded)
    assert reloaded.button(key="start_training").disabled  # one run per student, whichever tab
    other = student("bob")
    assert "stop_training" not in buttons(other)
    reloaded.button(key="stop_training").click().run()
    assert jobs.wait(run, 60).state == "stopped"


def test_the_teacher_key_is_typed_on_the_class_panel_and_a_link_never_carries_it(app, monkeypatch):
    monkeypatch.setattr(pages.classroom, "address", lambda: "10.0.0.7")  # a browser elsewhere
    monkeypatch.setenv("CAPSVIZ_TEACHER_KEY", "the-real-key-123")
    monkeypatch.delenv("CAPSVIZ_STUDENTS", raising=False)
    linked = AppTest.from_file(APP, default_timeout=60)
    linked.query_params["teacher"] = "the-real-key-123"
    linked.switch_page("pages/train.py").run()
    assert "teacher" not in linked.query_params  # taken out of the address, and not tried
    assert any("not used" in t.value for t in linked.toast) and not linked.sidebar.radio
    guess = AppTest.from_file(APP, default_timeout=60)
    guess.switch_page("pages/train.py").run()
    guess.sidebar.text_input(key="teacher_key_typed").input("a-guess-of-twelve").run()
    assert "That is not this server's teacher key." in [t.value for t in guess.toast]
    assert guess.button(key="start_training").disabled and not guess.sidebar.radio  # still a student: explore only
    teacher = AppTest.from_file(APP, default_timeout=60)
    teacher.switch_page("pages/train.py").run()
    teacher.sidebar.text_input(key="teacher_key_typed").input("the-real-key-123").run()
    assert not teacher.exception and not teacher.button(key="start_training").disabled
    assert teacher.sidebar.radio(key="class_mode").value == "explore"  # the class settings are the teacher's to change
    teacher.sidebar.radio(key="class_mode").set_value("train").run()
    assert access.settings(app.folder) == {"students": "train"}
    guess.run()  # the student now may train
    assert not guess.button(key="start_training").disabled
