"""The only threading code: the server's training queue, which the Train page polls.

One run trains at a time: two runs on a 2-core CPU would each go at half speed and finish no
sooner, and the other pages would stall. Runs started while one is going wait in a first-come
queue and start by themselves. The app processes of one server (`capsviz app --replicas`) each
have their own queue of threads, and every run is also a row of the class's store (capsviz.store,
in the model folder): a run trains when no other run of the server trains and no live run started
before it waits, so the second Start on another replica queues behind the first, in the order
they were pressed; a lock file in the model folder is held while a run trains, so that not even a
store out of step lets two train at once. Every run belongs to the student who started it (`owner`:
capsviz.access.identity, the same in every tab and after a reload); only they and the teacher
(the Teacher page, on any replica: the store carries the request) may stop or cancel it, and the
page shows a failure only to them. A student has at most one run going or waiting, at most
MAX_WAITING runs wait in all and at most MAX_WAITING_PER_ADDRESS from one address (the teacher's
are let in beyond). Worker threads never touch Streamlit; pages read `snapshot()` from a polling
fragment.
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from capsviz.checkpoint import model_stem
from capsviz.config import user_dataset
from capsviz.data import DATASETS
from capsviz.data.sources import SOURCES, locate, missing_message
from capsviz.errors import CapsvizError
from capsviz.i18n import N_, language, speaking, t, tn
from capsviz.paths import lock_file
from capsviz.progress import duration
from capsviz.store import ACTIVE, RUN_BEAT_S, RunLimits, store
from capsviz.train import Event, TrainRun, train

# Steps left out of the rate: the first ones build the model, fill caches and start the data
# feed, so they take many times longer than the steps after them.
WARMUP_STEPS = 3
# Steps measured after the warm-up before any estimate is shown. Later the rate is taken over the
# more recent half of the steps since the warm-up: the first steps after it still run slower, and
# the machine's load changes while a run goes, so a rate over all steps would overstate the time left.
MEASURED_STEPS = 3

# Runs that are over stay listed (with their curves) so that their sessions find them again;
# beyond this many the oldest are forgotten, or a server that runs for months would keep them all.
KEEP_ENDED = 50
# Points of the loss and accuracy curves sent to the browser each second: a 50-epoch run has tens
# of thousands of steps, more than a chart shows and more than a browser redraws every second.
CURVE_POINTS = 1000
# Runs waiting in one app process's queue, all students together: at a few minutes a run, ten
# waiting keep the machine busy for most of a lesson. $CAPSVIZ_MAX_WAITING changes it.
MAX_WAITING = int(os.environ.get("CAPSVIZ_MAX_WAITING", "10"))
# Runs waiting from one address: half the queue, so one machine's script (however many identities
# it made) leaves the other half to everyone else. A class behind one school NAT is one address:
# it shares these 5 places (docs/class.md). The server's own machine (the teacher) is not limited.
MAX_WAITING_PER_ADDRESS = int(os.environ.get("CAPSVIZ_MAX_WAITING_PER_ADDRESS", str(max(1, MAX_WAITING // 2))))
# The lock file in the model folder that one training run of the server's app processes holds.
TRAINING_LOCK = ".capsviz-training.lock"


def model_name(text: str, folder: Path | None = None) -> str:
    """The file stem a "Save as" text gives (capsviz.checkpoint.model_stem), checked against the
    models in `folder` for a look-alike name."""
    existing = [p.stem for p in Path(folder).glob("*.safetensors")] if folder is not None and Path(folder).is_dir() else []
    return model_stem(text, existing)


@dataclass
class Snapshot:
    """What a page draws of one run at one moment."""

    state: str  # queued | running | finished | stopped | failed | cancelled
    run: TrainRun
    out: Path
    owner: str
    position: int | None  # 0 while it trains, 1.. in the queue, None once over
    step: int  # 0 and total 0 until the first step (the data and model are still being prepared)
    total: int
    images_per_s: float | None  # measured after the warm-up steps; None until then
    eta_s: float | None  # None until measured, and once the run is over
    epoch_s: float | None  # seconds per epoch at the measured rate, its test included once measured
    stopping: bool = False  # Stop was pressed; the run ends at its next step
    testing: bool = False  # an epoch is over and the model is being measured on the test set
    elsewhere: bool = False  # its turn has come, but another app process of this server trains
    test_s: float | None = None  # how long the last test took; None until one has run
    curve: list[dict] = field(default_factory=list)  # per step: step, loss, accuracy
    evaluations: list[dict] = field(default_factory=list)
    message: str = ""


def thin(points: list, most: int) -> list:
    """Every k-th point, k as small as keeps at most `most`, and always the last (the newest step)."""
    if len(points) <= most:
        return list(points)
    kept = points[:: -(-len(points) // (most - 1))]  # ceil(n / (most - 1)): at most most - 1 points
    return kept if kept[-1] is points[-1] else kept + [points[-1]]


# What a run that ended before its first step says (its state's words), and what an ended run's
# line ends with; translated where shown.
BEFORE_FIRST_STEP = {
    "running": N_("{name}: preparing the data and the model ..."),
    "cancelled": N_("{name}: taken out of the queue"),
    "failed": N_("{name}: failed before its first step"),
}
ENDED = {"finished": N_("finished"), "stopped": N_("stopped"), "failed": N_("failed")}


def progress_line(s: Snapshot, name: str | None = None) -> str:
    """The one line under a run's progress bar. Never "step 0/0" (before the first step the data
    and model are being prepared), and a time left only while the run trains at a measured rate.
    `name`: the model's name as the page shows it (made plain for Markdown), else its file stem.
    A list of facts joined by " · ", each its own message."""
    name = s.out.stem if name is None else name
    if s.state == "queued":
        return t("{name}: queued, position {position}", name=name, position=s.position)
    if s.state == "running" and s.elsewhere:
        return t("{name}: next; waiting for a run that another app process of this server trains", name=name)
    if s.total == 0:  # no step yet
        if s.state in BEFORE_FIRST_STEP:
            return t(BEFORE_FIRST_STEP[s.state], name=name)
        return t("{name}: {state}", name=name, state=t(ENDED[s.state])) if s.state in ENDED else f"{name}: {s.state}"
    parts = [t("{name}: step {step}/{total}", name=name, step=s.step, total=s.total)]
    if s.state == "running" and s.stopping:
        parts.append(t("stopping after this step ..."))
    elif s.state == "running" and s.testing:
        parts.append(t("measuring the test error ..."))
        if s.eta_s is not None and s.step < s.total:
            parts.append(t("about {time} left", time=duration(s.eta_s)))
    elif s.state == "running" and s.eta_s is None:
        parts.append(t("measuring the speed ..."))
    elif s.state == "running":
        parts.append(t("{rate} images/s", rate=f"{s.images_per_s:.0f}"))
        if s.test_s is None:  # the test has not run yet: said, not guessed
            parts += [
                t("{time} per epoch", time=duration(s.epoch_s)),
                t("about {time} left, plus the test after each epoch", time=duration(s.eta_s)),
            ]
        else:
            parts += [t("{time} per epoch with its test", time=duration(s.epoch_s)), t("about {time} left", time=duration(s.eta_s))]
    elif s.state in ENDED:
        parts.append(t(ENDED[s.state]))
    return " · ".join(parts)


class TrainJob:
    """One run: queued, then trained on its own thread by its queue."""

    _ids = itertools.count(1)

    def __init__(
        self, run: TrainRun, out: Path, owner: str, resume: Path | None, queue: TrainQueue, replace: bool = False, address: str = "local"
    ):
        self.id = next(TrainJob._ids)
        self.run, self.out, self.owner, self.resume, self.replace = run, Path(out), owner, resume, replace
        self.address = address
        # the language of the student who started it: what its thread says (a failure, where it saved) is for them
        self.language = language()
        self.rid: str | None = None  # its row in the class's store (None where the model folder cannot hold one)
        self._place: int | None = None  # its place in the server's queue while it waits for another process's run
        self.stop = threading.Event()
        self._queue = queue
        self._lock = threading.Lock()
        self._last: Event | None = None
        self._first_step: int | None = None  # the step a resumed run starts from
        self._marks: list[tuple[float, int]] = []  # (time, step) of each step from the end of the warm-up
        self._rate: float | None = None  # steps per second, measured
        self._curve: list[dict] = []
        self._evals: list[dict] = []
        self._state, self._message = "queued", ""
        self._testing = False
        self._test_start: float | None = None
        self._test_s: float | None = None
        self._elsewhere = False
        self.thread = threading.Thread(target=self._work, name=f"capsviz-train-{self.id}", daemon=True)

    def _on(self, e: Event) -> None:
        with self._lock:
            if e.kind == "step":
                now = time.monotonic()
                if self._first_step is None:
                    self._first_step = e.step - 1
                if e.step - self._first_step >= WARMUP_STEPS:
                    self._marks.append((now, e.step))
                n = len(self._marks)
                if n > MEASURED_STEPS:
                    t0, s0 = self._marks[min(n // 2, n - 1 - MEASURED_STEPS)]
                    if now > t0:
                        self._rate = (e.step - s0) / (now - t0)
                self._last = e
                self._curve.append({"step": e.step, "loss": e.loss, "accuracy": e.accuracy})
            elif e.kind == "epoch":  # the train loop tests the model next
                self._testing, self._test_start = True, time.monotonic()
            elif e.kind == "evaluation":
                self._testing = False
                if self._test_start is not None:
                    self._test_s = time.monotonic() - self._test_start
                # the rate is re-measured from here: a window over the test's pause would count
                # the test twice (once in the rate, once in test_s); until then the last rate holds
                self._marks = []
                self._evals.append({"epoch": e.epoch, **e.metrics})
            elif e.kind in ("finished", "stopped", "failed"):
                self._state, self._message = e.kind, e.message

    def _store_turn(self) -> bool:
        """Wait for the run's turn in the server's queue (the class's store): True when it has
        come, False when the run was stopped or taken out meanwhile."""
        if self.rid is None:
            return True
        while True:
            try:
                place = store(self.out.parent).take_turn(self.rid)
            except Exception:  # noqa: BLE001 - the store went away: the lock file alone decides
                return True
            if place is None:
                return False
            with self._lock:
                self._place = place or None
            if not place:
                return True
            if self.stop.wait(0.5):
                return False

    def _beat(self) -> None:
        """While the run is queued or trains: tell the store this process is alive, and heed the
        teacher's stop from any replica."""
        with speaking(self.language):
            self._beating()

    def _beating(self) -> None:
        while self.state in ACTIVE:
            try:
                asked = store(self.out.parent).beat(self.rid)
            except Exception:  # noqa: BLE001
                asked = False
            if asked and not self.stop.is_set():
                self._queue.cancel(self, self.owner, teacher=True, why=t("removed by the teacher"))
            time.sleep(RUN_BEAT_S)
        self._end_row()

    def _end_row(self) -> None:
        if self.rid is not None:
            try:
                store(self.out.parent).end_run(self.rid, self.state)
            except Exception:  # noqa: BLE001
                pass

    def _turn(self) -> int | None:
        """Wait for the run's turn in the server's queue, then until no other app process of this
        server trains (the model folder's lock file), or until the run is stopped: the lock's open
        file, or None when stopped or the folder cannot hold a lock (then the run goes ahead: a
        single process needs none)."""
        if not self._store_turn():
            return None
        try:
            self.out.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.out.parent / TRAINING_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return -1
        while True:
            try:
                lock_file(fd, wait=False)
                with self._lock:
                    self._elsewhere = False
                return fd
            except BlockingIOError:
                with self._lock:
                    self._elsewhere = True
                if self.stop.wait(1.0):
                    os.close(fd)
                    return None
            except OSError:  # a filesystem without locks
                return fd

    def _work(self) -> None:
        with speaking(self.language):
            self._working()

    def _working(self) -> None:
        fd = None
        try:
            fd = self._turn()
            if fd is None:
                with self._lock:
                    if self._state == "running":
                        self._state, self._message = "cancelled", self._message or t("stopped before it started")
                return
            train(self.run, self.out, on_event=self._on, stop=self.stop, resume=self.resume, replace=self.replace)
        except CapsvizError:
            pass  # train() reported it through the "failed" event
        except Exception as e:  # noqa: BLE001 - a crash must reach the page, not vanish with the thread
            self._on(Event("failed", message=f"{type(e).__name__}: {e}"))
        finally:
            if fd is not None and fd >= 0:
                os.close(fd)  # lets go of the lock
            with self._lock:
                if self._state == "running":  # train() returned without a final event
                    self._state = "finished"
            self._end_row()  # at once, not at the next beat: another process's run may start now
            self._queue._advance()

    def snapshot(self) -> Snapshot:
        position = self._queue.position(self)
        with self._lock:
            e, rate, test_s = self._last, self._rate, self._test_s
            if self._place and self._state == "running":  # its turn here, but the server's queue has runs before it
                return Snapshot(
                    "queued", self.run, self.out, self.owner, self._place, 0, 0, None, None, None, evaluations=[], message=self._message
                )
            stopping = self.stop.is_set() and self._state == "running"
            # no estimate once Stop is pressed: the run ends at its next step, not in "4.4 min"
            live = self._state == "running" and not stopping and rate is not None and e is not None
            per_epoch = e.total_steps / max(self.run.epochs, 1) if e else 0
            return Snapshot(
                state=self._state,
                run=self.run,
                out=self.out,
                owner=self.owner,
                position=position,
                step=e.step if e else 0,
                total=e.total_steps if e else 0,
                images_per_s=rate * self.run.batch_size if live else None,
                # tests still to run: the current epoch's (running or ahead) and every later one's
                eta_s=(e.total_steps - e.step) / rate + (self.run.epochs - e.epoch) * (test_s or 0.0) if live else None,
                epoch_s=per_epoch / rate + (test_s or 0.0) if live else None,
                stopping=stopping,
                testing=self._testing and self._state == "running",
                elsewhere=self._elsewhere and self._state == "running",
                test_s=test_s,
                curve=thin(self._curve, CURVE_POINTS),
                evaluations=list(self._evals),
                message=self._message,
            )

    @property
    def state(self) -> str:
        with self._lock:
            return self._state


class TrainQueue:
    """First come, first trained: at most one run at a time, the rest wait in order."""

    def __init__(self):
        self._guard = threading.RLock()
        self._jobs: list[TrainJob] = []  # every run submitted, oldest first

    def submit(
        self,
        run: TrainRun,
        out: Path,
        owner: str,
        resume: Path | None = None,
        replace: bool = False,
        teacher: bool = False,
        address: str = "local",
    ) -> TrainJob:
        """Queue a run; it starts at once when nothing is training. What would only fail later on
        the thread, where the student would learn of it after the form was redrawn, is checked here
        and raised as CapsvizError: missing data, an unwritable folder, a name another run will
        write, a student who already has a run going or waiting, and a full queue (MAX_WAITING runs
        waiting on the server, MAX_WAITING_PER_ADDRESS from `address`; the `teacher`'s runs are
        let in beyond), every app process's runs counted through the class's store."""
        out = Path(out)
        if user_dataset(run.dataset):  # a user's images: read now (cached for the run), refused now if unreadable
            from capsviz.data.user import load_user

            load_user(run.dataset, run.resize)
        else:
            source = SOURCES[DATASETS[run.dataset].source] if run.dataset in DATASETS else None
            if source is None:
                raise CapsvizError(
                    t("unknown dataset {dataset}; choose from {choices}", dataset=repr(run.dataset), choices=", ".join(DATASETS))
                )
            place, places = locate(source, run.data_dir)
            if place is None:
                raise CapsvizError(missing_message(source, places))
        folder = out.parent if out.parent.exists() else out.parent.parent
        if not os.access(folder, os.W_OK):
            raise CapsvizError(t("cannot write to {folder}; make it writable or point CAPSVIZ_CHECKPOINTS elsewhere", folder=out.parent))
        with self._guard:
            for j in self._jobs:
                if j.state not in ACTIVE:
                    continue
                if j.owner == owner:
                    raise CapsvizError(t("You already have a run going or waiting (in this tab or another); stop or cancel it first."))
                if j.out == out:
                    raise CapsvizError(t("Another run will save to {name}; choose a new name.", name=out.name))
            waiting = len(self.waiting())
            if not teacher and self.running() is not None and waiting >= MAX_WAITING:
                raise CapsvizError(
                    tn(
                        "The training queue is full: {n} run waits for its turn on this machine. Try again when it has finished.",
                        "The training queue is full: {n} runs wait for their turn on this machine. Try again when one has finished.",
                        waiting,
                    )
                )
            job = TrainJob(run, out, owner, resume, self, replace, address)
            rid = secrets.token_hex(8)
            local = address == "local"
            limits = RunLimits(MAX_WAITING, MAX_WAITING if local else MAX_WAITING_PER_ADDRESS)
            try:
                store(out.parent).add_run(rid, owner, address, out.name, teacher, limits)
                job.rid = rid
            except CapsvizError:
                raise
            except Exception:  # noqa: BLE001 - a folder that cannot hold the store: this process's queue alone
                pass
            ended = [j for j in self._jobs if j.state not in ACTIVE]
            forget = {j.id for j in ended[: max(0, len(ended) - KEEP_ENDED + 1)]}
            self._jobs = [j for j in self._jobs if j.id not in forget] + [job]
            if job.rid is not None:
                threading.Thread(target=job._beat, name=f"capsviz-beat-{job.id}", daemon=True).start()
            self._advance()
            return job

    def _advance(self) -> None:
        """Start the oldest queued run when none is training (after a submit, and as each run ends)."""
        with self._guard:
            if self.running() is not None:
                return
            nxt = next((j for j in self._jobs if j.state == "queued"), None)
            if nxt is not None:
                with nxt._lock:
                    nxt._state = "running"
                nxt.thread.start()

    def running(self) -> TrainJob | None:
        with self._guard:
            return next((j for j in self._jobs if j.state == "running"), None)

    def waiting(self) -> list[TrainJob]:
        with self._guard:
            return [j for j in self._jobs if j.state == "queued"]

    def position(self, job: TrainJob) -> int | None:
        """0 while it trains, N when N-1 runs wait before it, None once it is over."""
        with self._guard:
            if job.state == "running":
                return job._place or 0
            queued = self.waiting()
            return queued.index(job) + 1 if job in queued else None

    def latest(self, owner: str) -> TrainJob | None:
        """The session's most recent run, whatever its state."""
        with self._guard:
            return next((j for j in reversed(self._jobs) if j.owner == owner), None)

    def others(self, owner: str) -> list[TrainJob]:
        """Other sessions' runs that train or wait, the training one first."""
        with self._guard:
            return [j for j in self._jobs if j.owner != owner and j.state in ACTIVE]

    def cancel(self, job: TrainJob, owner: str, teacher: bool = False, why: str = "") -> None:
        """Stop a training run at its next step (it keeps a resumable checkpoint), or take a waiting
        one out of the queue. Only the student who started a run, and the teacher, may end it."""
        if job.owner != owner and not teacher:
            raise CapsvizError(t("Only the student who started this run can stop it."))
        with self._guard:
            if job.state == "queued":
                with job._lock, speaking(job.language):
                    job._state, job._message = "cancelled", why or t("taken out of the queue before it started")
                job._end_row()
                return
        with job._lock:
            if why and job._place:  # waiting for another process's run: it never trained
                job._message = why
        job.stop.set()

    def latest_any(self) -> TrainJob | None:
        with self._guard:
            return self.running() or (self._jobs[-1] if self._jobs else None)


_queue = TrainQueue()  # one per server: every browser session shares the CPU it trains on


def queue() -> TrainQueue:
    return _queue


def current() -> TrainJob | None:
    """The run that trains now, else the most recently submitted one."""
    return _queue.latest_any()


def wait(job: TrainJob, timeout: float) -> Snapshot:
    """Block until the run is over (or `timeout` seconds pass); for tests and scripts."""
    end = time.monotonic() + timeout
    while job.state in ACTIVE and time.monotonic() < end:
        time.sleep(0.05)
    if job.thread.ident is not None:  # started: let it finish writing and hand over to the next run
        job.thread.join(max(0.0, end - time.monotonic()))
    return job.snapshot()
