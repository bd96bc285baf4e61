"""The training queue behind the Train page: one run at a time, in order, each owned by the
browser session that started it; the time estimate from the run's own measured rate."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from capsviz import checkpoint as ckpt
from capsviz import jobs
from capsviz.errors import CapsvizError
from capsviz.train import Event, TrainRun

ROOT = Path(__file__).resolve().parents[1]
# cnn-small: the fastest preset to step on the CPU
QUICK = dict(model="cnn-small", batch_size=8, train_limit=32, test_limit=16, device="cpu", epochs=1)
LONG = dict(QUICK, train_limit=600, epochs=50)  # ~4,000 steps: runs until stopped


def wait_until(predicate, timeout=60.0):
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_save_as_names_are_cleaned_and_shipped_names_refused():
    assert jobs.model_name("  my run  ") == "my-run"
    assert jobs.model_name("capsnet_2-try") == "capsnet_2-try"
    for bad in ["", "  ", "---", "!!", "my run!"]:
        with pytest.raises(CapsvizError, match="letters, digits|letter or a digit"):
            jobs.model_name(bad)
    with pytest.raises(CapsvizError, match="come with capsviz.*new name"):
        jobs.model_name("capsnet-small-mnist")
    with pytest.raises(CapsvizError, match="cannot be replaced"):
        jobs.model_name("capsnet-mnist ")  # the same file once cleaned
    with pytest.raises(CapsvizError, match="cannot be replaced"):
        jobs.model_name("CapsNet-Small-MNIST")  # the same file on a case-insensitive disk


def test_shipped_names_are_the_repositorys_checkpoints():
    if not shutil.which("git") or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "checkpoints"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    shipped = {Path(p).stem for p in tracked if p.endswith(".safetensors")}
    assert shipped and ckpt.SHIPPED == shipped


def snap(**kw):
    base = dict(
        state="running",
        run=TrainRun(),
        out=Path("m.safetensors"),
        owner="a",
        position=0,
        step=0,
        total=0,
        images_per_s=None,
        eta_s=None,
        epoch_s=None,
    )
    return jobs.Snapshot(**{**base, **kw})


def test_progress_line_never_says_0_of_0_and_gives_no_time_once_over():
    assert jobs.progress_line(snap()) == "m: preparing the data and the model ..."
    assert jobs.progress_line(snap(state="queued", position=2)) == "m: queued, position 2"
    assert jobs.progress_line(snap(state="cancelled", position=None)) == "m: taken out of the queue"
    assert jobs.progress_line(snap(step=2, total=10)) == "m: step 2/10 · measuring the speed ..."
    live = snap(step=4, total=10, images_per_s=128.0, eta_s=270.0, epoch_s=360.0)
    assert (
        jobs.progress_line(live) == "m: step 4/10 · 128 images/s · 6.0 min per epoch · about 4.5 min left, plus the test after each epoch"
    )
    tested = snap(step=4, total=10, images_per_s=128.0, eta_s=270.0, epoch_s=360.0, test_s=20.0)
    assert jobs.progress_line(tested) == "m: step 4/10 · 128 images/s · 6.0 min per epoch with its test · about 4.5 min left"
    for over in ("stopped", "finished", "failed"):
        line = jobs.progress_line(snap(state=over, step=4, total=10, position=None))
        assert "left" not in line and "0/0" not in line and line.endswith(over)
    assert "left" not in jobs.progress_line(snap(step=4, total=10, stopping=True))
    testing = dict(images_per_s=128.0, eta_s=60.0, epoch_s=360.0, testing=True)
    assert jobs.progress_line(snap(step=5, total=10, **testing)) == "m: step 5/10 · measuring the test error ... · about 60 s left"
    assert jobs.progress_line(snap(step=10, total=10, **testing)) == "m: step 10/10 · measuring the test error ..."


def test_estimate_is_the_rate_measured_after_the_warm_up_steps(monkeypatch):
    """A slow first step (building the model, warming caches) must not enter the rate: the guess
    from one early step is what made the page say 9.9 min for a ~6 min epoch."""
    clock = [100.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: clock[0])
    q = jobs.TrainQueue()
    job = jobs.TrainJob(TrainRun(epochs=2, batch_size=32), Path("m.safetensors"), "a", None, q)
    job._state = "running"  # what the queue sets when it starts the thread
    total = 200
    durations = [10.0, 3.0] + [0.5] * 20  # two slow warm-up steps, then a steady 0.5 s a step
    for k, dt in enumerate(durations, start=1):
        clock[0] += dt
        job._on(Event("step", 0, k, total, loss=1.0, accuracy=50.0))
        s = job.snapshot()
        if k < jobs.WARMUP_STEPS + jobs.MEASURED_STEPS:
            assert s.eta_s is None and s.images_per_s is None, k
    s = job.snapshot()
    assert s.images_per_s == pytest.approx(2 * 32)  # 2 steps/s, batch 32
    assert s.eta_s == pytest.approx((total - len(durations)) * 0.5)
    assert s.epoch_s == pytest.approx(100 * 0.5)  # 200 steps over 2 epochs
    job.stop.set()
    assert job.snapshot().eta_s is None  # Stop pressed: no time left to promise
    job._on(Event("stopped", message="stopped"))
    assert job.snapshot().eta_s is None and job.snapshot().state == "stopped"


def test_the_test_after_each_epoch_is_timed_and_counted_once(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: clock[0])
    job = jobs.TrainJob(TrainRun(epochs=3, batch_size=8), Path("m.safetensors"), "a", None, jobs.TrainQueue())
    job._state = "running"
    for k in range(1, 11):  # epoch 1: 10 steps of 1 s
        clock[0] += 1.0
        job._on(Event("step", 0, k, 30))
    assert job.snapshot().test_s is None and job.snapshot().eta_s == pytest.approx(20)  # the tests not yet known
    job._on(Event("epoch", 1, 10, 30))
    assert job.snapshot().testing
    clock[0] += 5.0  # the test takes 5 s
    job._on(Event("evaluation", 1, 10, 30, metrics={"test_error": 5.0}))
    s = job.snapshot()
    assert not s.testing and s.test_s == 5.0 and s.evaluations == [{"epoch": 1, "test_error": 5.0}]
    for k in range(11, 21):  # epoch 2: the pause for the test must not slow the measured rate
        clock[0] += 1.0
        job._on(Event("step", 1, k, 30))
    s = job.snapshot()
    assert s.eta_s == pytest.approx(10 * 1.0 + 2 * 5.0)  # 10 steps, and the tests of epochs 2 and 3
    assert s.epoch_s == pytest.approx(10 + 5)


def test_estimate_follows_a_change_of_speed(monkeypatch):
    """The machine gets busier half-way (another program starts): the rate is the recent one,
    not the average since the start (which would say 1.18 steps/s here)."""
    clock = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: clock[0])
    job = jobs.TrainJob(TrainRun(batch_size=8), Path("m.safetensors"), "a", None, jobs.TrainQueue())
    job._state = "running"
    for k, dt in enumerate([0.5] * 20 + [1.0] * 40, start=1):
        clock[0] += dt
        job._on(Event("step", 0, k, 1000))
    assert job.snapshot().eta_s == pytest.approx(1000 - 60)  # 1 step/s


def test_resumed_run_warms_up_again(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: clock[0])
    job = jobs.TrainJob(TrainRun(batch_size=8), Path("m.safetensors"), "a", None, jobs.TrainQueue())
    job._state = "running"
    for k in range(501, 501 + jobs.WARMUP_STEPS + jobs.MEASURED_STEPS - 1):  # a resume starts at step 500
        clock[0] += 1.0
        job._on(Event("step", 3, k, 1000))
    assert job.snapshot().eta_s is None
    clock[0] += 1.0
    job._on(Event("step", 3, k + 1, 1000))
    assert job.snapshot().eta_s == pytest.approx(1000 - (k + 1))


def test_a_real_run_reports_a_time_only_after_measuring(synthetic_data, tmp_path):
    q = jobs.TrainQueue()
    job = q.submit(TrainRun(**dict(QUICK, train_limit=160)), tmp_path / "m.safetensors", "a")
    seen = []
    while job.state in jobs.ACTIVE:
        s = job.snapshot()
        seen.append((s.step, s.total, s.eta_s))
        time.sleep(0.01)
    done = jobs.wait(job, 60)
    assert done.state == "finished", done.message
    assert all(total > 0 for step, total, _ in seen if step > 0)
    assert all(eta is None for step, _, eta in seen if step < jobs.WARMUP_STEPS + jobs.MEASURED_STEPS)
    assert any(eta is not None for *_, eta in seen)
    assert done.eta_s is None and done.step == done.total == 20


def test_runs_train_one_at_a_time_in_order_and_nothing_is_lost(synthetic_data, tmp_path):
    q = jobs.TrainQueue()
    a = q.submit(TrainRun(**LONG), tmp_path / "a.safetensors", "session-a")
    b = q.submit(TrainRun(**QUICK), tmp_path / "b.safetensors", "session-b")
    c = q.submit(TrainRun(**QUICK), tmp_path / "c.safetensors", "session-c")
    assert (q.position(a), q.position(b), q.position(c)) == (0, 1, 2)
    assert b.snapshot().state == "queued" and jobs.progress_line(b.snapshot()) == "b: queued, position 1"
    assert [j.id for j in q.others("session-c")] == [a.id, b.id]
    wait_until(lambda: a.snapshot().step >= 5)
    with pytest.raises(CapsvizError, match="Only the student who started"):
        q.cancel(a, "session-b")
    assert b.state == "queued" and not a.stop.is_set()

    states = []
    q.cancel(a, "session-a")
    while any(j.state in jobs.ACTIVE for j in (a, b, c)):
        states.append([j.state for j in (a, b, c)])
        time.sleep(0.005)
    assert all(s.count("running") <= 1 for s in states)
    order = [next((i for i, s in enumerate(states) if s[k] == "running"), len(states)) for k in range(3)]
    assert order[0] <= order[1] <= order[2]  # first come, first trained
    assert [jobs.wait(j, 60).state for j in (a, b, c)] == ["stopped", "finished", "finished"]
    assert not ckpt.read_meta(tmp_path / "a.safetensors").complete  # the stopped run's resumable checkpoint
    assert ckpt.train_state_path(tmp_path / "a.safetensors").is_file()
    assert all(ckpt.read_meta(tmp_path / f"{n}.safetensors").complete for n in "bc")


def test_a_waiting_run_can_leave_the_queue(synthetic_data, tmp_path):
    q = jobs.TrainQueue()
    a = q.submit(TrainRun(**LONG), tmp_path / "a.safetensors", "a")
    b = q.submit(TrainRun(**QUICK), tmp_path / "b.safetensors", "b")
    c = q.submit(TrainRun(**QUICK), tmp_path / "c.safetensors", "c")
    q.cancel(b, "b")
    assert b.state == "cancelled" and q.position(b) is None and q.position(c) == 1
    assert q.latest("b") is b and q.others("a") == [c]
    q.cancel(a, "a")
    assert jobs.wait(c, 60).state == "finished"
    assert b.thread.ident is None and not (tmp_path / "b.safetensors").exists()  # it never ran


def test_refusals_come_before_anything_is_queued(synthetic_data, tmp_path, monkeypatch):
    q = jobs.TrainQueue()
    a = q.submit(TrainRun(**LONG), tmp_path / "a.safetensors", "a")
    with pytest.raises(CapsvizError, match="already have a run"):
        q.submit(TrainRun(**QUICK), tmp_path / "other.safetensors", "a")
    with pytest.raises(CapsvizError, match="Another run will save to a.safetensors"):
        q.submit(TrainRun(**QUICK), tmp_path / "a.safetensors", "b")
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(tmp_path / "nothing"))
    with pytest.raises(CapsvizError, match="mnist not found"):
        q.submit(TrainRun(**QUICK), tmp_path / "b.safetensors", "b")
    with pytest.raises(CapsvizError, match="unknown dataset"):
        q.submit(TrainRun(**dict(QUICK, dataset="cifar")), tmp_path / "b.safetensors", "b")
    assert q.latest("b") is None and q.waiting() == []  # nothing of b's was queued
    q.cancel(a, "a")
    jobs.wait(a, 60)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_folder_is_refused_at_once(synthetic_data, tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    with pytest.raises(CapsvizError, match="cannot write"):
        jobs.TrainQueue().submit(TrainRun(**QUICK), folder / "m.safetensors", "a")


def test_a_failure_stays_with_its_run_and_the_queue_goes_on(synthetic_data, tmp_path):
    q = jobs.TrainQueue()
    # resuming from a file that does not exist fails on the thread, after the run was queued
    bad = q.submit(TrainRun(**QUICK), tmp_path / "bad.safetensors", "a", resume=tmp_path / "missing.safetensors")
    good = q.submit(TrainRun(**QUICK), tmp_path / "good.safetensors", "b")
    failed = jobs.wait(bad, 60)
    assert failed.state == "failed" and failed.message
    assert jobs.progress_line(failed) == "bad: failed before its first step"
    done = jobs.wait(good, 60)
    assert done.state == "finished" and failed.message not in done.message
    assert q.latest("a") is bad and q.latest("b") is good  # each session finds its own run


def test_a_long_lived_server_forgets_only_the_oldest_ended_runs(synthetic_data, tmp_path):
    q = jobs.TrainQueue()
    runner = q.submit(TrainRun(**LONG), tmp_path / "long.safetensors", "runner")
    for k in range(jobs.KEEP_ENDED + 10):  # queued, then taken out again: ended without training
        j = q.submit(TrainRun(**QUICK), tmp_path / f"m{k}.safetensors", f"s{k}")
        q.cancel(j, f"s{k}")
    assert len(q._jobs) <= jobs.KEEP_ENDED + 1
    assert q.latest("s0") is None and q.latest(f"s{jobs.KEEP_ENDED + 9}") is j
    assert q.running() is runner  # an active run is never forgotten
    q.cancel(runner, "runner")
    jobs.wait(runner, 60)


def test_the_queue_is_bounded_in_all_and_per_student(synthetic_data, tmp_path, monkeypatch):
    monkeypatch.setattr(jobs, "MAX_WAITING", 2)
    q = jobs.TrainQueue()
    a = q.submit(TrainRun(**LONG), tmp_path / "a.safetensors", "a")
    waiting = [q.submit(TrainRun(**QUICK), tmp_path / f"w{k}.safetensors", f"w{k}") for k in range(2)]
    with pytest.raises(CapsvizError, match="queue is full: 2 runs wait"):
        q.submit(TrainRun(**QUICK), tmp_path / "late.safetensors", "late")
    assert q.latest("late") is None
    with pytest.raises(CapsvizError, match="already have a run going or waiting"):  # a second tab of one student
        q.submit(TrainRun(**QUICK), tmp_path / "again.safetensors", "w0")
    teachers = q.submit(TrainRun(**QUICK), tmp_path / "t.safetensors", "teacher", teacher=True)  # the teacher is let in
    assert q.position(teachers) == 3
    for j in [*waiting, teachers]:
        q.cancel(j, j.owner)
    q.cancel(a, "a")
    jobs.wait(a, 60)


def test_one_run_at_a_time_across_the_app_processes_of_a_server(synthetic_data, tmp_path):
    """Another app process (--replicas) that trains holds the model folder's lock file: a run
    whose turn has come waits for it, says so, can be stopped meanwhile, and trains once it is free."""
    from capsviz.paths import lock_file

    fd = os.open(tmp_path / jobs.TRAINING_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    lock_file(fd, wait=False)  # as the other process's run does
    q = jobs.TrainQueue()
    job = q.submit(TrainRun(**QUICK), tmp_path / "m.safetensors", "a")
    wait_until(lambda: job.snapshot().elsewhere)
    time.sleep(1.5)
    s = job.snapshot()
    assert s.state == "running" and s.step == 0 and not (tmp_path / "m.safetensors").exists()
    assert "another app process" in jobs.progress_line(s)
    os.close(fd)  # the other run ends
    done = jobs.wait(job, 60)
    assert done.state == "finished" and not done.elsewhere and (tmp_path / "m.safetensors").exists()

    fd = os.open(tmp_path / jobs.TRAINING_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    lock_file(fd, wait=False)
    waiting = q.submit(TrainRun(**QUICK), tmp_path / "n.safetensors", "b")
    wait_until(lambda: waiting.snapshot().elsewhere)
    q.cancel(waiting, "b")
    assert jobs.wait(waiting, 10).state == "cancelled" and not (tmp_path / "n.safetensors").exists()
    os.close(fd)


@pytest.mark.parametrize("n", [0, 1, 999, 1000, 1001, 1999, 2000, 23_437])
def test_curves_are_thinned_for_the_browser_keeping_the_newest_step(n):
    points = list(range(n))
    kept = jobs.thin(points, 1000)
    assert len(kept) <= 1000 and kept == sorted(set(kept))
    assert kept == points if n <= 1000 else (kept[0] == 0 and kept[-1] == n - 1 and len(kept) > 500)
