"""A student's tabs take turns (capsviz.access.Turns, used by app.py around every page run): one
run of theirs at a time, so several tabs weigh on the class as one student; others and the
teacher never wait for them. Students' page runs take seats (capsviz.access.Seats): a
few at a time in one process, the teacher never waiting, long work giving its seat back."""

import threading
import time

from capsviz.access import SEATS_DEFAULT, Seats, Turns


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


def seated(seats, teacher=False, away_too=False):
    """A page run that holds a seat until released; with away_too, it steps away from its seat
    (a long sweep) until `back` is set: (started, release, stepped_away, back, thread)."""
    started, release, stepped_away, back = threading.Event(), threading.Event(), threading.Event(), threading.Event()

    def page():
        with seats.take(teacher):
            started.set()
            if away_too:
                with seats.away():
                    stepped_away.set()
                    back.wait(10)
            release.wait(10)

    t = threading.Thread(target=page)
    t.start()
    return started, release, stepped_away, back, t


def test_students_runs_take_seats_and_the_rest_wait_in_turn():
    seats = Seats(2)
    runs = [seated(seats) for _ in range(2)]
    assert all(r[0].wait(5) for r in runs)
    third = seated(seats)
    assert not third[0].wait(0.3), "a third run started beside two seated ones"
    teacher = seated(seats, teacher=True)
    assert teacher[0].wait(5), "the teacher waited for a seat"
    runs[0][1].set()
    assert third[0].wait(5), "the waiting run never got the seat given back"
    for r in (*runs, third, teacher):
        r[1].set()
        r[4].join(5)


def test_long_work_gives_its_seat_back_and_takes_one_again():
    seats = Seats(1)
    long = seated(seats, away_too=True)
    assert long[2].wait(5)
    other = seated(seats)
    assert other[0].wait(5), "a run waited while the only seated run was away on long work"
    long[3].set()  # the long work ends: its run waits for a seat again
    time.sleep(0.2)
    assert long[4].is_alive()
    other[1].set()
    long[1].set()
    other[4].join(5), long[4].join(5)
    assert not long[4].is_alive()
    with seats.take():  # every seat given back
        pass


def test_a_seat_is_given_back_when_the_page_fails():
    seats = Seats(1)
    try:
        with seats.take():
            raise RuntimeError("a page error")
    except RuntimeError:
        pass
    done = threading.Event()
    threading.Thread(target=lambda: (seats.take().__enter__(), done.set())).start()
    assert done.wait(5)


def test_the_number_of_seats_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("CAPSVIZ_SEATS", "3")
    assert Seats.from_env().n == 3
    for odd in ("0", "-2"):
        monkeypatch.setenv("CAPSVIZ_SEATS", odd)
        assert Seats.from_env().n == 1
    monkeypatch.setenv("CAPSVIZ_SEATS", "many")
    assert Seats.from_env().n == SEATS_DEFAULT
    monkeypatch.delenv("CAPSVIZ_SEATS")
    assert Seats.from_env().n == SEATS_DEFAULT
