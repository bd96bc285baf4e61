"""The Train page through AppTest: two AppTest instances are two browsers (students) of one server
(they share the process, so the training queue, as a served app's sessions do)."""

import re
import time

import pytest
import test_app
from streamlit.testing.v1 import AppTest

from capsviz import checkpoint as ckpt
from capsviz import jobs

APP = test_app.APP
# test_app's fixtures, used here as they are: the app with tiny checkpoints and synthetic data, run
# under its own st.navigation router
app, router_mode = test_app.app, test_app.router_mode

LONG = dict(model="cnn-small", epochs=50, batch=8, limit=600)  # ~3,750 fast steps: trains until stopped
QUICK = dict(model="cnn-small", epochs=1, batch=8, limit=32)


@pytest.fixture(autouse=True)
def queue(monkeypatch):
    """A queue of this test's own; its runs are stopped at the end so no thread outlives the test."""
    q = jobs.TrainQueue()
    monkeypatch.setattr(jobs, "_queue", q)
    yield q
    for j in q.waiting() + ([q.running()] if q.running() else []):
        q.cancel(j, j.owner)
    for j in list(q._jobs):
        jobs.wait(j, 60)


def session():
    """Another browser session on the same server (same checkpoints folder and data)."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/train.py").run()
    return at


def fill(at, model, epochs, batch, limit, name):
    at.selectbox(key="t_model").set_value(model)
    at.number_input(key="t_epochs").set_value(epochs)
    at.number_input(key="t_batch").set_value(batch)
    at.number_input(key="t_limit").set_value(limit)
    at.selectbox(key="t_device").set_value("cpu")
    at.text_input(key="t_name").set_value(name)
    return at


def start(at, name, **form):
    fill(at, name=name, **{**QUICK, **form}).button(key="start_training").click().run()
    assert not at.exception, at.exception
    return at


def own_job(q, at):
    return q.latest(at.session_state["capsviz_session_id"])  # AppTest sends no cookies: each session is its own


def wait_until(predicate, timeout=60.0):
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def texts(at, kind):
    return [e.value for e in getattr(at, kind)]


def buttons(at):
    return [b.key for b in at.button]


def test_progress_shows_a_measured_estimate_and_none_after_stop(app, queue):
    app.switch_page("pages/train.py").run()
    assert any("measured on the run itself" in c.value for c in app.caption)
    assert not app.progress  # nothing trains yet: no bar, no "step 0/0"
    start(app, "timed", **LONG)
    job = own_job(queue, app)
    assert job is not None and "0/0" not in app.progress[0].text
    assert app.button(key="start_training").disabled  # one run per session at a time
    wait_until(lambda: job.snapshot().eta_s is not None)
    app.run()
    line = app.progress[0].text
    assert line.startswith("timed: step ") and "images/s" in line and "per epoch" in line and "left" in line
    app.button(key="stop_training").click().run()
    assert job.stop.is_set()
    assert jobs.wait(job, 60).state == "stopped"
    app.run()
    assert not app.exception
    line = app.progress[0].text
    assert line.endswith("· stopped") and "left" not in line and "images/s" not in line
    assert "Stopped at step" in app.warning[0].value and "resume_training" in buttons(app)
    assert not app.button(key="start_training").disabled
    assert (app.folder / "timed.safetensors").is_file()


def test_a_failed_start_is_shown_only_to_its_session_and_the_form_stays_usable(app, queue, monkeypatch, tmp_path):
    app.switch_page("pages/train.py").run()
    other = session()
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(tmp_path / "no-data-here"))
    start(app, "nodata")
    assert "mnist not found" in app.error[0].value
    assert not app.button(key="start_training").disabled and own_job(queue, app) is None
    other.run()
    assert not other.error and not other.exception
    app.run()
    assert not app.error  # the message belonged to that press of Start


def test_a_run_that_fails_on_its_thread_shows_its_error_to_its_session_only(app, queue):
    app.switch_page("pages/train.py").run()
    other = session()
    start(app, "broken", **LONG)
    job = own_job(queue, app)
    wait_until(lambda: job.snapshot().step >= 2)
    app.button(key="stop_training").click().run()
    jobs.wait(job, 60)
    app.run()
    ckpt.train_state_path(app.folder / "broken.safetensors").write_bytes(b"garbage")  # the resumable state is damaged
    app.button(key="resume_training").click().run()
    resumed = own_job(queue, app)
    assert resumed is not job and jobs.wait(resumed, 60).state == "failed"
    app.run()
    assert app.error and app.error[0].value.startswith("Training failed:")
    assert not app.button(key="start_training").disabled
    other.run()
    assert not other.error and not other.exception
    assert "No training run yet" in other.info[0].value


def test_a_second_session_is_offered_the_queue_or_to_watch(app, queue):
    app.switch_page("pages/train.py").run()
    start(app, "first", **LONG)
    first = own_job(queue, app)
    second = session()
    assert "Another student is training" in second.info[0].value
    start(second, "second")
    assert own_job(queue, second) is None  # asked, not yet queued
    offer = next(i.value for i in second.info if "Runs train one at a time" in i.value)
    assert "position 1" in offer
    assert {"queue_run", "watch_other"} <= set(buttons(second))

    second.button(key="queue_run").click().run()
    mine = own_job(queue, second)
    assert mine.state == "queued" and queue.position(mine) == 1
    assert any("Queued, position 1" in i.value for i in second.info)
    assert second.button(key="start_training").disabled
    second.button(key="cancel_queued").click().run()
    assert mine.state == "cancelled" and first.state == "running"
    assert not second.button(key="start_training").disabled

    start(second, "second")
    second.button(key="watch_other").click().run()
    assert "Another student's run" in texts(second, "subheader")
    assert second.progress[-1].text.startswith("first: ")
    assert "stop_training" not in buttons(second)  # only its own session may stop it
    assert own_job(queue, second) is mine  # nothing new queued by watching

    app.button(key="stop_training").click().run()
    jobs.wait(first, 60)
    second.run()
    assert not second.error and not second.warning, [w.value for w in second.warning]  # the other session's ending is not shown as its own
    assert any("The run you were watching is over" in i.value for i in second.info)


def test_queued_run_starts_by_itself_when_the_first_ends(app, queue):
    app.switch_page("pages/train.py").run()
    start(app, "first", **LONG)
    second = session()
    start(second, "second")
    second.button(key="queue_run").click().run()
    app.run()
    assert "1 run of another student waits in the queue after yours." in texts(app, "info")
    app.button(key="stop_training").click().run()
    done = jobs.wait(own_job(queue, second), 60)
    assert done.state == "finished"
    second.run()
    assert "Finished" in second.success[0].value
    assert (app.folder / "first.safetensors").is_file() and (app.folder / "second.safetensors").is_file()


def test_shipped_models_cannot_be_replaced(app, queue):
    app.switch_page("pages/train.py").run()
    start(app, "capsnet-small-mnist")
    assert "come with capsviz" in app.error[0].value and "new name" in app.error[0].value
    assert own_job(queue, app) is None and not app.button(key="start_training").disabled


def test_an_existing_model_is_replaced_only_when_confirmed(app, queue):
    app.switch_page("pages/train.py").run()
    before = (app.folder / "tiny-capsnet.safetensors").read_bytes()
    start(app, "tiny-capsnet")
    warning = app.warning[0].value
    assert "already exists" in warning and "test error 12.50%" in warning and own_job(queue, app) is None
    assert (
        "Guessing one of 10 classes at random gets 90.00% wrong" in warning
        and "12.50% against 90.00% for guessing, 77.50 points better" in warning
    )
    app.button(key="cancel_pending").click().run()
    assert not app.warning and own_job(queue, app) is None
    assert (app.folder / "tiny-capsnet.safetensors").read_bytes() == before

    start(app, "tiny-capsnet")
    app.button(key="confirm_replace").click().run()
    assert jobs.wait(own_job(queue, app), 60).state == "finished"
    assert ckpt.read_meta(app.folder / "tiny-capsnet.safetensors").run["model"] == "cnn-small"


def test_a_replacing_run_stopped_early_leaves_the_old_model_and_resumes_beside_it(app, queue):
    app.switch_page("pages/train.py").run()
    old = app.folder / "tiny-capsnet.safetensors"
    before = old.read_bytes()
    start(app, "tiny-capsnet", **LONG)
    app.button(key="confirm_replace").click().run()
    job = own_job(queue, app)
    wait_until(lambda: job.snapshot().step > 0)
    app.button(key="stop_training").click().run()
    assert jobs.wait(job, 60).state == "stopped"
    app.run()
    assert old.read_bytes() == before  # the old model stays until a run has finished and been tested
    pending = ckpt.pending_path(old)
    assert not ckpt.read_meta(pending).complete
    assert "tiny-capsnet.new.safetensors keeps it" in app.warning[0].value
    app.button(key="resume_training").click().run()
    resumed = own_job(queue, app)
    assert resumed is not job and resumed.resume == pending
    queue.cancel(resumed, resumed.owner)
    jobs.wait(resumed, 60)
    assert old.read_bytes() == before


def test_the_page_estimates_memory_before_start_and_times_an_epoch_on_request(app, queue):
    app.switch_page("pages/train.py").run()
    line = next(c.value for c in app.caption if c.value.startswith("estimate: about"))
    assert "at batch 128" in line and "per epoch" not in line  # memory at once, time only when asked
    app.button(key="t_time").click().run()
    assert not app.exception
    line = next(c.value for c in app.caption if c.value.startswith("estimate: about"))
    assert re.search(r"about [\d.]+ (s|min|h) per epoch of [\d,]+ images", line), line
    assert not [b for b in app.button if b.key == "t_time"]


def test_a_capsnet_trained_from_the_page_with_other_couplings_and_a_seed_records_both(app, queue):
    """The routing lab compares models trained with each routing and seed: the page trains them."""
    app.switch_page("pages/train.py").run()
    fill(app, name="rand-seed2", **{**QUICK, "model": "capsnet-small"})
    app.run()
    app.selectbox(key="t_couplings").set_value("random")
    app.number_input(key="t_seed").set_value(2)
    app.run()
    assert "--couplings random --seed 2" in " ".join(texts(app, "caption"))
    app.button(key="start_training").click().run()
    assert not app.exception, app.exception
    snap = jobs.wait(own_job(queue, app), 120)
    assert snap.state == "finished", snap
    meta = ckpt.read_meta(app.folder / "rand-seed2.safetensors")
    assert meta.config.couplings == "random" and meta.run["seed"] == 2
    app.selectbox(key="t_model").set_value("cnn-small").run()
    assert not [s for s in app.selectbox if s.key == "t_couplings"]  # a CNN has no couplings to choose
