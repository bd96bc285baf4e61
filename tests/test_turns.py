"""A student's tabs take turns (capsviz.access.Turns, used by app.py around every page run): one
run of theirs at a time, so several tabs weigh on the class as one student; others and the
teacher never wait for them."""

import threading

from capsviz.access import Turns


def run_in_thread(turns, who, teacher=False):
    """A page run that holds its turn until released: (started, release, thread)."""
    started, release = threading.Event(), threading.Event()

    def page():
        with turns.take(who, teacher):
            started.set()
            release.wait(10)

    t = threading.Thread(target=page)
    t.start()
    return started, release, t


def test_a_students_second_tab_waits_for_the_first():
    turns = Turns()
    a_started, a_release, a = run_in_thread(turns, "student")
    assert a_started.wait(5) and turns.busy("student")
    b_started, b_release, b = run_in_thread(turns, "student")
    assert not b_started.wait(0.3), "the second tab ran beside the first"
    a_release.set()
    assert b_started.wait(5), "the second tab never got its turn"
    b_release.set()
    a.join(5), b.join(5)
    assert not turns.busy("student")


def test_other_students_and_the_teacher_never_wait():
    turns = Turns()
    a_started, a_release, a = run_in_thread(turns, "student")
    assert a_started.wait(5)
    other_started, other_release, other = run_in_thread(turns, "another student")
    teacher_started, teacher_release, teacher = run_in_thread(turns, "student", teacher=True)  # the same id, as teacher
    assert other_started.wait(5) and teacher_started.wait(5)
    for e in (a_release, other_release, teacher_release):
        e.set()
    for t in (a, other, teacher):
        t.join(5)


def test_a_turn_is_given_back_when_the_page_fails():
    turns = Turns()
    try:
        with turns.take("student"):
            raise RuntimeError("a page error")
    except RuntimeError:
        pass
    assert not turns.busy("student")


def test_made_up_ids_cannot_grow_it_without_bound():
    turns = Turns(limit=10)
    for k in range(100):
        with turns.take(f"made-up {k}"):
            pass
    assert len(turns._locks) <= 10
