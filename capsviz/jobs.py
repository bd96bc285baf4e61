"""The only threading code: one background training run per server that pages poll.

The worker thread never touches Streamlit; pages read `snapshot()` from a polling fragment.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from capsviz.errors import CapsvizError
from capsviz.train import Event, TrainRun, train


@dataclass
class Snapshot:
    state: str  # running | finished | stopped | failed
    run: TrainRun
    out: Path
    step: int
    total: int
    images_per_s: float | None
    eta_s: float | None
    curve: list[dict] = field(default_factory=list)  # per step: step, loss, accuracy
    evaluations: list[dict] = field(default_factory=list)
    message: str = ""


class TrainJob:
    def __init__(self, run: TrainRun, out: Path, resume: Path | None = None):
        self.run, self.out, self.resume = run, Path(out), resume
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._last: Event | None = None
        self._curve: list[dict] = []
        self._evals: list[dict] = []
        self._state, self._message = "running", ""
        self.thread = threading.Thread(target=self._work, name="capsviz-train", daemon=True)

    def _on(self, e: Event) -> None:
        with self._lock:
            if e.kind == "step":
                self._last = e
                self._curve.append({"step": e.step, "loss": e.loss, "accuracy": e.accuracy})
            elif e.kind == "evaluation":
                self._evals.append({"epoch": e.epoch, **e.metrics})
            elif e.kind in ("finished", "stopped", "failed"):
                self._state, self._message = e.kind, e.message

    def _work(self) -> None:
        try:
            train(self.run, self.out, on_event=self._on, stop=self.stop, resume=self.resume)
        except CapsvizError:
            pass  # reported through the "failed" event
        except Exception as e:  # noqa: BLE001 - a crash must reach the page, not vanish with the thread
            self._on(Event("failed", message=f"{type(e).__name__}: {e}"))

    def snapshot(self) -> Snapshot:
        with self._lock:
            e = self._last
            return Snapshot(
                self._state,
                self.run,
                self.out,
                e.step if e else 0,
                e.total_steps if e else 0,
                e.images_per_s if e else None,
                e.eta_s if e else None,
                list(self._curve),
                list(self._evals),
                self._message,
            )


_current: TrainJob | None = None
_guard = threading.Lock()


def current() -> TrainJob | None:
    return _current


def start(run: TrainRun, out: Path, resume: Path | None = None) -> TrainJob:
    """Start a run unless one is already going (one per server: every tab sees the same one)."""
    global _current
    with _guard:
        if _current is not None and _current.snapshot().state == "running":
            raise CapsvizError("a training run is already in progress on this server; wait for it or stop it")
        _current = TrainJob(run, out, resume)
        _current.thread.start()
        return _current


def wait(job: TrainJob, timeout: float) -> Snapshot:
    end = time.monotonic() + timeout
    while job.thread.is_alive() and time.monotonic() < end:
        time.sleep(0.05)
    return job.snapshot()
