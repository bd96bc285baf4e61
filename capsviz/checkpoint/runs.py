"""Where a training run writes and how its files stay one unit.

Beside each `model.safetensors` a resumable run keeps `model.safetensors.train.pt` (optimizer,
schedule position, RNG state), read back with `torch.load(weights_only=True)` and validated. The
two are one unit: the state records the digest of the weights saved with it, and `save_run`
writes them so that a crash at any point leaves a pair that belongs together (see there). A run
that is to replace a model saves beside it until it is finished (`plan_write`, `promote`); one
writer holds a checkpoint at a time (`writer_lock`), and a full disk is found before the work
(`check_room`).
"""

from __future__ import annotations

import math
import os
import pickle
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from capsviz.checkpoint.files import read_meta, save_checkpoint, saving, weights_digest
from capsviz.checkpoint.names import is_shipped
from capsviz.errors import CapsvizError, first_line
from capsviz.i18n import t
from capsviz.paths import atomic_write, lock_file, partial_files, remove_partial
from capsviz.schema import Invalid, check_train_state


def pending_path(target: Path) -> Path:
    """Where a run that is to replace the model at `target` saves until it has finished and been
    evaluated: `name.new.safetensors` beside it."""
    target = Path(target)
    return target.with_name(f"{target.stem}.new{target.suffix}")


def latest_save(target: Path) -> Path:
    """Where the run that writes `target` saved last: the run waiting to replace it, else `target`."""
    pending = pending_path(target)
    return pending if pending.exists() else Path(target)


@dataclass(frozen=True)
class WritePlan:
    """Where a writer saves (`work`) and the model it is for (`target`); the two differ when the
    run is to replace a model already there, which `promote` does once the run is finished."""

    target: Path
    work: Path

    @property
    def replaces(self) -> bool:
        return self.work != self.target


def plan_write(target: Path, *, resume: Path | None = None, replace: bool = False, flag: str = "--out") -> WritePlan:
    """The one rule every writer of a model follows (`capsviz train`, `export`, the Train page):

    - a shipped model is never written;
    - a model already at `target` is replaced only on an explicit request: `replace`, or a resume
      of its own run (`resume` is `target` or the run waiting to replace it, `pending_path`), and
      even then only once the new run has finished and been evaluated: until then the run saves to
      `pending_path(target)` (`work`), and `promote` moves it over the old model at the end;
    - an unfinished run waiting to replace `target` is continued, never started over.
    Raises CapsvizError, in one line saying what to do, when the write is refused."""
    target = Path(target)
    if target.is_dir():
        raise CapsvizError(
            t(
                "{flag} {target} is a folder; name the checkpoint file to write, e.g. {example}",
                flag=flag,
                target=target,
                example=target / "model.safetensors",
            )
        )
    if is_shipped(target):
        raise CapsvizError(
            t("{name} is a model that comes with capsviz and is never overwritten; choose another {flag}", name=target.name, flag=flag)
        )
    pending = pending_path(target)
    same = resume is not None and Path(resume).resolve() in (target.resolve(), pending.resolve())
    if not target.exists():
        return WritePlan(target, target)
    if not (same or replace):
        raise CapsvizError(
            t(
                "{target} already holds a model ({model}); add --replace to replace it once the new run has finished "
                "and been evaluated, or choose another {flag}",
                target=target,
                model=describe(target),
                flag=flag,
            )
        )
    if pending.exists() and (resume is None or Path(resume).resolve() != pending.resolve()):
        raise CapsvizError(
            t(
                "an unfinished run that is to replace {name} is saved at {pending}; continue it with --resume {pending}, "
                "or delete that file to start again",
                name=target.name,
                pending=pending,
            )
        )
    return WritePlan(target, pending)


def describe(path: Path) -> str:
    """A few words on the model in a file, for messages: epochs and test error, or why it is unusable."""
    try:
        meta = read_meta(path)
    except CapsvizError:
        return t("a file capsviz cannot read")
    m = meta.metrics
    said = dict(family=meta.family, epochs=f"{round(meta.epochs or 0, 1):g}")
    if m.measured:
        return t("{family}, {epochs} epochs, {error}% test error", error=f"{m.test_error:.2f}", **said)
    return t("{family}, {epochs} epochs, not evaluated", **said)


def promote(plan: WritePlan) -> None:
    """Move a finished run's pair from `plan.work` over the model at `plan.target`, in the order
    `save_run` uses (state to `.next`, weights, then state), so a crash at any point leaves a pair
    that belongs together and `recover` completes the move. Call with the target's writer lock held."""
    if not plan.replaces:
        return
    work_state, nxt = train_state_path(plan.work), _next_state_path(plan.target)
    if work_state.exists():
        os.replace(work_state, nxt)
    else:
        train_state_path(plan.target).unlink(missing_ok=True)  # a state left there would belong to the old weights
    os.replace(plan.work, plan.target)
    if nxt.exists():
        os.replace(nxt, train_state_path(plan.target))


def train_state_path(path: Path) -> Path:
    return Path(str(path) + ".train.pt")


def _next_state_path(path: Path) -> Path:
    """Where the new training state waits while its weights are renamed into place."""
    return Path(str(path) + ".train.pt.next")


def save_run(path: Path, model: torch.nn.Module, meta: dict, state: dict) -> None:
    """Weights and training state saved as one unit, tied by the weights' digest.

    Order: (1) the state, with the digest of the weights about to be written, to `.train.pt.next`;
    (2) the weights over `path`; (3) `.next` over `.train.pt`. A crash before (2) leaves the
    previous pair (and a `.next` that matches nothing, removed by `recover`); a crash between (2)
    and (3) leaves new weights whose state waits in `.next` (`load_train_state` finds it,
    `recover` completes the rename). Every step is an atomic rename of a synced file."""
    path = Path(path)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    state = dict(state, weights_sha256=weights_digest(tensors))
    nxt = _next_state_path(path)
    with saving(path):
        try:
            atomic_write(nxt, lambda tmp: torch.save(state, tmp))
            save_checkpoint(path, model, meta)
        except BaseException:
            nxt.unlink(missing_ok=True)
            raise
        os.replace(nxt, train_state_path(path))


def recover(path: Path) -> None:
    """Tidy what an interrupted `save_run` or `promote` left at `path` and at the run waiting to
    replace it (call with the writer lock of `path` held): partial files are removed, and a waiting
    `.next` state is renamed into place if it belongs to the weights there, removed otherwise."""
    path, pending = Path(path), pending_path(path)
    for p in (path, pending):
        for part in partial_files(p):  # the state's partial files too: `.name.train.pt.*.part`
            remove_partial(part)
    _settle(pending, (pending,))
    _settle(path, (path, pending))


def _settle(path: Path, owners: tuple[Path, ...]) -> None:
    """The `.next` state waiting at `path` goes beside the first of `owners` whose weights it belongs to, or away."""
    nxt = _next_state_path(path)
    if not nxt.exists():
        return
    try:
        state = _read_state(nxt)
    except CapsvizError:
        state = {}
    for weights in owners:
        home = train_state_path(weights)
        try:
            digest = read_meta(weights).weights_sha256 if weights.exists() else None
        except CapsvizError:
            digest = None
        if digest is not None and state.get("weights_sha256") == digest:  # a `promote` stopped half-way sends it back
            os.replace(nxt, home)
            return
    nxt.unlink(missing_ok=True)


def _read_state(p: Path) -> dict:
    """A training state file through torch's safe loader and the schema, as one line on failure."""
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # torch's message quotes advice to load the file unsafely: never shown
        raise CapsvizError(t("{path}: holds Python objects a safe load refuses; it is not a capsviz training state", path=p)) from None
    except Exception as e:  # noqa: BLE001 - any other failure to read means a bad file
        raise CapsvizError(
            t("{path}: cannot be read as a capsviz training state ({why})", path=p, why=f"{type(e).__name__}: {first_line(e)}")
        ) from None
    if isinstance(state, dict) and "weights_sha256" not in state and "optimizer" in state:
        raise CapsvizError(
            t(
                "{path}: saved by an older capsviz, without the digest that ties it to its weights, so resuming it "
                "cannot be checked; start a new run from these weights with --init-from {weights}",
                path=p,
                weights=str(p)[: -len(".train.pt")],
            )
        )
    try:
        check_train_state(state)
    except Invalid as e:
        raise CapsvizError(t("{path}: unusable training state: {why}", path=p, why=e)) from None
    return state


def load_train_state(path: Path, weights_sha256: str | None = None) -> dict:
    """The validated training state saved with the weights at `path`. `weights_sha256` (the
    weights' digest, read from the file when not given) must be the one the state records: a
    state from another save would resume with a schedule, optimizer and data position that do
    not belong to these weights."""
    path = Path(path)
    p = train_state_path(path)
    if not p.is_file() and not _next_state_path(path).is_file():
        raise CapsvizError(t("{path} not found: only runs saved by `capsviz train` can be resumed", path=p))
    state = _read_state(p) if p.is_file() else None
    digest = weights_sha256 or read_meta(path).weights_sha256
    if state is not None and state["weights_sha256"] == digest:
        return state
    nxt = _next_state_path(path)
    if nxt.is_file():  # a save stopped between renaming the weights and the state
        waiting = _read_state(nxt)
        if waiting["weights_sha256"] == digest:
            return waiting
    raise CapsvizError(
        t(
            "{state} does not belong to the weights in {path} (they were saved by different runs or an interrupted copy); "
            "resuming would not continue either run exactly. Start a new run from these weights with --init-from {path}",
            state=p,
            path=path,
        )
    )


@contextmanager
def writer_lock(path: Path):
    """One writer per checkpoint: an exclusive lock on `.<name>.lock` beside it, held until the
    block ends. The kernel drops it when the process dies, so a killed run never blocks the next."""
    path = Path(path)
    lock = path.parent / f".{path.name}.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise CapsvizError(t("cannot write in {folder} ({why}); choose another --out", folder=path.parent, why=e.strerror or e)) from None
    try:
        try:
            lock_file(fd, wait=False)
        except BlockingIOError:
            raise CapsvizError(
                t(
                    "{path} is being written by another capsviz run (process {pid}); wait for it to finish or choose another --out",
                    path=path,
                    pid=_read_pid(fd),
                )
            ) from None
        except OSError as e:  # a filesystem without locks (some network mounts)
            raise CapsvizError(t("cannot lock {lock} ({why}); choose an --out on a local disk", lock=lock, why=e.strerror or e)) from None
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        os.close(fd)


def _read_pid(fd: int) -> str:
    """The holder's process id, as it wrote it ("?" where the lock keeps it from being read)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 32).decode(errors="replace").strip() or "?"
    except OSError:
        return "?"


def check_room(path: Path, need_bytes: int) -> None:
    """Before an epoch: the folder must take new files and have room for a new pair (the old one
    stays until the new one is complete), so a full disk is found before the work, not after."""
    path = Path(path)
    folder = path.parent
    if path.is_dir():
        raise CapsvizError(
            t("{path} is a folder; name the checkpoint file to write, e.g. {example}", path=path, example=path / "model.safetensors")
        )
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".part")
        os.close(fd)
        os.unlink(probe)
        free = shutil.disk_usage(folder).free
    except OSError as e:
        raise CapsvizError(t("cannot write in {folder} ({why}); choose another --out", folder=folder, why=e.strerror or e)) from None
    if free < need_bytes:
        raise CapsvizError(
            t(
                "{folder} has {free} MB free; saving {name} needs about {need} MB. Free some space or choose another --out",
                folder=folder,
                free=f"{free / 1e6:.0f}",
                name=path.name,
                need=math.ceil(need_bytes / 1e6),
            )
        )


def pair_bytes(model: torch.nn.Module) -> int:
    """About what `save_run` writes: the weights, the optimizer's two moments (Adam), and a margin."""
    weights = sum(x.numel() * x.element_size() for x in model.state_dict().values())
    return 4 * weights + (1 << 20)
