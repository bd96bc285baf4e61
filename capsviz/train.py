"""The one training loop, used by `python -m capsviz train` and by the app's Train page.

`train(run, on_event, stop)` trains `run.model` on `run.dataset`, reports Events, honours
`stop` within one step, and leaves a checkpoint after every epoch (and on stop) from which
`resume=` continues exactly: same learning-rate schedule, same data order, same augmentation.
Under torchrun it trains with DistributedDataParallel; rank 0 alone writes and reports.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.distributed as dist

from capsviz import checkpoint as ckpt
from capsviz.config import TrainRun, preset, to_dict, user_dataset
from capsviz.data import DATASETS, batches, class_names, input_shape, load_split, num_batches, prefetch
from capsviz.data.user import short_name
from capsviz.devices import autocast, describe_hardware, pick_device
from capsviz.errors import CapsvizError
from capsviz.i18n import t
from capsviz.models import build_model, count_parameters
from capsviz.routing import compile_em
from capsviz.schema import CheckpointMeta


def default_decay_steps(dataset: str) -> int:
    """Steps per x0.96 learning-rate decay unless a run says otherwise (capsviz.config.Dataset;
    a user's images decay as MNIST does)."""
    return DATASETS[dataset].decay_steps if dataset in DATASETS else DATASETS["mnist"].decay_steps


@dataclass
class Event:
    """kind: step | epoch | evaluation | finished | stopped | failed."""

    kind: str
    epoch: int = 0
    step: int = 0
    total_steps: int = 0
    loss: float | None = None
    accuracy: float | None = None
    images_per_s: float | None = None
    eta_s: float | None = None
    metrics: dict = field(default_factory=dict)
    message: str = ""


def model_config(run: TrainRun):
    """The preset, sized for the dataset's images (side and channels) and classes, with the run's
    overrides. An iteration count reaches only the families that iterate (Efficient-CapsNet routes
    in one pass)."""
    base = preset(run.model)
    shape = input_shape(run.dataset, run.resize)
    overrides = {"in_size": shape.size, "in_channels": shape.channels, "num_classes": shape.num_classes}
    if hasattr(base, "routing_iterations"):
        overrides["routing_iterations"] = run.routing_iterations
    overrides |= {k: getattr(run, k) for k in base.run_options}
    return preset(run.model, **overrides)


def objective(model, out, target, y, progress: float, margin_start: float = 0.2) -> torch.Tensor:
    """Each family's loss as its paper defines it (the model's `loss`). target: what a decoder
    should redraw; progress in [0, 1] and margin_start set the spread loss's margin."""
    return model.loss(out, y, target, progress=progress, margin_start=margin_start)


def correct(scores: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-image correctness. Two labels (MultiMNIST): both must be the two most active classes."""
    if y.dim() == 1:
        return scores.argmax(1) == y
    top2 = scores.topk(2, dim=1).indices.sort(1).values
    return (top2 == y.sort(1).values).all(1)


@torch.no_grad()
def evaluate(
    model,
    dataset: str,
    data,
    *,
    batch_size=256,
    device="cpu",
    limit=None,
    precision="fp32",
    on_progress=None,
    routing: str | None = None,
    iterations: int | None = None,
) -> dict:
    """Test error on `data` (its first `limit` images); `on_progress(done, total)` after each batch.
    `routing` runs a vector-capsule model with another routing (capsviz.routing.ROUTINGS), and
    `iterations` a routed model with another iteration count; both for this evaluation only."""
    run_with = {k: v for k, v in (("routing", routing), ("iterations", iterations)) if v is not None}
    model.eval()
    total = len(data) if limit is None else min(limit, len(data))
    device = torch.device(device)
    right = seen = 0
    for x, y, _ in batches(dataset, data, batch_size, train=False, device=device, limit=limit):
        with autocast(device, precision):
            out = model(x, **run_with)
        right += int(correct(out.scores.float(), y).sum())
        seen += len(y)
        if on_progress:
            on_progress(seen, total)
    two = dataset in DATASETS and DATASETS[dataset].labels == 2
    rule = "both digits among the two most active capsules" if two else "argmax of the class scores"
    return {
        "test_error": 100.0 * (1 - right / max(seen, 1)),
        "test_accuracy": 100.0 * right / max(seen, 1),
        "n_test": seen,
        "how": f"{short_name(dataset)} test split, first {seen} images, {rule}, no augmentation"
        + (f", run with {routing} routing" if routing else "")
        + (f", {iterations} routing iteration{'s' if iterations != 1 else ''}" if iterations else ""),
    }


def _distributed() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return (dist.get_rank(), world) if world > 1 else (0, 1)


def train(
    run: TrainRun,
    out: Path,
    on_event: Callable[[Event], None] | None = None,
    stop: threading.Event | None = None,
    resume: Path | None = None,
    replace: bool = False,
) -> CheckpointMeta | None:
    """Train, save a checkpoint every epoch and at the end; return the final metadata (None in the
    processes of a distributed run other than rank 0, which write nothing).

    The run saves to `out`, unless a model is there already: then only `replace` or a resume of
    that model's own run may replace it, and the run saves beside it
    (`checkpoint.pending_path(out)`) until it has finished and been evaluated, when it takes the
    old model's place (`checkpoint.plan_write` is the rule)."""
    out = Path(out)
    emit = on_event or (lambda e: None)
    try:
        if int(os.environ.get("RANK", "0")) != 0:  # only rank 0 writes
            return _train(run, ckpt.WritePlan(out, out), emit, stop or threading.Event(), resume)
        with ckpt.writer_lock(out):
            ckpt.recover(out)
            plan = ckpt.plan_write(out, resume=resume, replace=replace)
            return _train(run, plan, emit, stop or threading.Event(), resume)
    except CapsvizError as e:
        emit(Event("failed", message=str(e)))
        raise


def _train(run, plan: ckpt.WritePlan, emit, stop, resume):
    """The run in the steps a reader can follow: place it, resume or start, build, prepare, then
    epochs of training each followed by an evaluation and a save; at the end, the finished run
    takes the place of the model it replaces."""
    out = plan.work
    rank, world, device = _place(run)
    state = None
    if resume:
        run, state = _resumed_run(run, resume)
    model, started_from = _build(run, device, state, resume)
    train_set = load_split(run.dataset, "train", run.data_dir, run.resize)
    test_set = load_split(run.dataset, "test", run.data_dir, run.resize)
    loop = _prepare(run, out, model, len(train_set), rank, world, device, state, resume, started_from)
    metrics = loop.history[-1]["metrics"] if loop.history else {}
    for epoch in range(loop.start_epoch, run.epochs):
        if rank == 0 and epoch > loop.start_epoch:  # the first was checked before the data loaded
            ckpt.check_room(out, loop.room)
        first = loop.start_batch if epoch == loop.start_epoch else 0
        stats = _one_epoch(loop, train_set, epoch, first, emit, stop)
        if stats.stopped_at is not None:
            loop.save(epoch, stats.stopped_at, metrics, final=False)
            said = t("stopped at step {step}/{total}; {how}", step=loop.step, total=loop.total, how=continue_with(plan))
            emit(Event("stopped", epoch, loop.step, loop.total, message=said))
            return ckpt.read_meta(out) if rank == 0 else None
        if rank == 0:
            metrics = _evaluate_epoch(loop, test_set, epoch, stats, emit)
        loop.save(epoch + 1, 0, metrics, final=epoch + 1 == run.epochs)
    if world > 1:
        digest = ckpt.weights_digest(model.state_dict())
        print(f"rank {rank} weights sha256 {digest}", flush=True)
        dist.barrier()
    if rank != 0:
        return None
    ckpt.promote(plan)
    meta = ckpt.read_meta(plan.target)
    said = t("saved {path}, replacing the model that was there", path=plan.target) if plan.replaces else t("saved {path}", path=plan.target)
    emit(Event("finished", run.epochs, loop.step, loop.total, metrics=meta.metrics.to_dict(), message=said))
    return meta


def continue_with(plan: ckpt.WritePlan) -> str:
    """How to go on with a run saved at `plan.work` (the CLI's words, in the reader's language)."""
    if plan.replaces:
        return t(
            "saved at {work} ({target} is unchanged until the run finishes); continue with --resume {work} --out {target}",
            work=plan.work,
            target=plan.target,
        )
    return t("continue with --resume {target} --out {target}", target=plan.target)


def _place(run: TrainRun) -> tuple[int, int, torch.device]:
    """This process's rank, the number of processes, and the device it trains on (its own GPU
    under torchrun)."""
    rank, world = _distributed()
    device = pick_device(run.device)
    if world > 1 and device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    return rank, world, device


def _resumed_run(run: TrainRun, resume: Path) -> tuple[TrainRun, dict]:
    """The saved run, with the epochs, device and data folder asked for now, and its training
    state; refused when it has already trained every epoch asked for."""
    state = ckpt.load_train_state(resume)
    saved = TrainRun(**state["run"])
    run = replace(saved, epochs=run.epochs, device=run.device, data_dir=run.data_dir)
    if state["epoch"] >= run.epochs and state["batch"] == 0:
        raise CapsvizError(
            t(
                "{path} has already trained its {epochs} epochs; ask for more with --epochs (e.g. --epochs {more})",
                path=resume,
                epochs=state["epoch"],
                more=state["epoch"] + 1,
            )
        )
    return run, state


def _build(run: TrainRun, device, state: dict | None, resume: Path | None):
    """The model, seeded by the run, with the weights it continues from (a resume or --init-from),
    and what a fine-tuned run records of where it started (None for a fresh one)."""
    torch.manual_seed(run.seed)
    cfg = model_config(run)
    model = build_model(cfg).to(device)
    if not (state or run.init_from):
        return model, None
    source = resume if state else Path(run.init_from)
    loaded, source_meta = ckpt.load_checkpoint(source)
    if loaded.config != cfg:
        mine, theirs = to_dict(cfg), to_dict(loaded.config)
        diff = ", ".join(
            t("{field} {there} there, {here} here", field=k, there=theirs.get(k), here=mine.get(k))
            for k in sorted(mine.keys() | theirs.keys())
            if mine.get(k) != theirs.get(k)
        )
        raise CapsvizError(t("{path} holds a different model from the one this run trains: {diff}", path=source, diff=diff))
    model.load_state_dict(loaded.state_dict())
    # a resumed run keeps what its first part recorded; a fresh one records its source (total_training() sums the chain)
    return model, source_meta.started_from if state else ckpt.lineage(source, source_meta)


@dataclass
class _Loop:
    """What a run carries from step to step, and saves with its weights after every epoch."""

    run: TrainRun
    out: Path
    model: torch.nn.Module
    net: torch.nn.Module  # the model as it steps: under DistributedDataParallel, compiled
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LRScheduler
    rank: int
    world: int
    device: torch.device
    per_epoch: int
    meta_base: dict
    room: int  # bytes a save needs
    step: int = 0
    history: list = field(default_factory=list)
    elapsed: float = 0.0
    start_epoch: int = 0
    start_batch: int = 0

    @property
    def total(self) -> int:
        return self.per_epoch * self.run.epochs

    def save(self, epoch: int, batch: int, metrics: dict, final: bool) -> None:
        """Weights, metadata and training state as one unit (rank 0 alone writes)."""
        if self.rank != 0:
            return
        meta = dict(
            self.meta_base,
            epochs=epoch + batch / self.per_epoch,
            metrics=metrics,
            history=self.history,
            training_time_s=round(self.elapsed, 1),
            complete=final,
        )
        state = {
            "run": asdict(self.run),
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "step": self.step,
            "epoch": epoch,
            "batch": batch,
            "history": self.history,
            "elapsed": self.elapsed,
            "torch_rng": torch.get_rng_state(),
        }
        ckpt.save_run(self.out, self.model, meta, state)


def _prepare(run, out, model, n_images, rank, world, device, state, resume, started_from) -> _Loop:
    """Optimizer and schedule (a resume's restored, with its position and RNG), the model as it
    will step, what every save records, and room on disk for the first save."""
    n_train = n_images if run.train_limit is None else min(run.train_limit, n_images)
    opt = torch.optim.Adam(model.parameters(), lr=run.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: run.lr_decay ** (s / run.decay_steps))
    resumed = {}
    if state:
        load_optimizer_state(opt, sched, state, ckpt.train_state_path(resume))
        resumed = {k: state[k] for k in ("step", "history", "elapsed")} | {"start_epoch": state["epoch"], "start_batch": state["batch"]}
        torch.set_rng_state(state["torch_rng"])
    net = model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if run.compile and model.config.routing == "em":  # the EM core is compiled, not the model around it
        compile_em()
    elif run.compile:
        net = torch.compile(net)
    meta_base = {
        "run": asdict(run),
        "dataset": run.dataset,
        "parameters": count_parameters(model),
        "hardware": describe_hardware(device) + (f" x{world} processes" if world > 1 else ""),
        "effective_batch_size": run.batch_size * world,
    }
    if user_dataset(run.dataset):  # pages name the classes and size inputs without the user's files
        shape = input_shape(run.dataset, run.resize)
        meta_base["classes"] = list(class_names(run.dataset, run.resize))
        meta_base["image"] = {"size": shape.size, "channels": shape.channels}
    if started_from:
        meta_base["started_from"] = started_from
    room = ckpt.pair_bytes(model)
    if rank == 0:
        ckpt.check_room(out, room)
    per_epoch = num_batches(n_train, run.batch_size, world)
    return _Loop(run, out, model, net, opt, sched, rank, world, device, per_epoch, meta_base, room, **resumed)


@dataclass
class _EpochStats:
    """One epoch's training so far: loss and accuracy sums over this process's images."""

    started: float
    seen: int = 0  # images, all processes
    loss_sum: float = 0.0
    right: int = 0
    n_loss: int = 0
    stopped_at: int | None = None  # the batch to resume from, when `stop` ended the epoch early

    def images_per_s(self) -> float:
        return self.seen / (time.perf_counter() - self.started)


def _one_epoch(loop: _Loop, train_set, epoch: int, first: int, emit, stop) -> _EpochStats:
    """Train on this epoch's batches from batch `first`, reporting every step; stop within one
    step when `stop` is set."""
    run, device, world = loop.run, loop.device, loop.world
    loop.net.train()
    stats = _EpochStats(time.perf_counter())
    feed = batches(
        run.dataset,
        train_set,
        run.batch_size,
        train=True,
        seed=run.seed,
        epoch=epoch,
        device=device,
        start=first,
        limit=run.train_limit,
        rank=loop.rank,
        world=world,
    )
    if device.type == "cuda":  # assemble the next batch on the CPU while the GPU steps
        feed = prefetch(feed)
    for k, (x, y, target) in enumerate(feed, start=first):
        t0 = time.perf_counter()
        with autocast(device, run.precision):
            o = loop.net(x, y)
            loss = objective(loop.model, o, target, y, loop.step / max(loop.total, 1), run.margin_start)
        if not torch.isfinite(loss):
            raise CapsvizError(
                t("loss became {loss} at step {step}; try a lower --lr or --precision fp32", loss=loss.item(), step=loop.step)
            )
        loop.opt.zero_grad(set_to_none=True)
        loss.backward()
        loop.opt.step()
        loop.sched.step()
        loop.step += 1
        loop.elapsed += time.perf_counter() - t0
        stats.seen += len(y) * world
        stats.loss_sum += loss.item() * len(y)
        stats.n_loss += len(y)
        stats.right += int(correct(o.scores.detach().float(), y).sum())
        ips = stats.images_per_s()
        if loop.rank == 0:
            eta = (loop.total - loop.step) * run.batch_size * world / max(ips, 1e-9)
            emit(Event("step", epoch, loop.step, loop.total, stats.loss_sum / stats.n_loss, 100 * stats.right / stats.n_loss, ips, eta))
        if stop.is_set():
            stats.stopped_at = k + 1
            break
    return stats


def _evaluate_epoch(loop: _Loop, test_set, epoch: int, stats: _EpochStats, emit) -> dict:
    """Report the epoch, measure the test error, and add both to the run's history."""
    run, n = loop.run, max(stats.n_loss, 1)
    emit(Event("epoch", epoch + 1, loop.step, loop.total, stats.loss_sum / n, 100 * stats.right / n, stats.images_per_s()))
    metrics = evaluate(loop.model, run.dataset, test_set, device=loop.device, limit=run.test_limit, precision=run.precision)
    loop.history.append(
        {
            "epoch": epoch + 1,
            "train_loss": stats.loss_sum / n,
            "train_accuracy": 100 * stats.right / n,
            "images_per_s": stats.images_per_s(),
            "metrics": metrics,
        }
    )
    emit(Event("evaluation", epoch + 1, loop.step, loop.total, metrics=metrics))
    return metrics


def load_optimizer_state(opt, sched, state: dict, where: Path) -> None:
    """A saved optimizer and schedule, refused in one line unless they fit this model: the same
    parameter groups and options, one entry per parameter with moments of its shape, all finite.
    (PyTorch checks only the number of parameters; a wrong shape would fail at the first step.)"""
    saved, fresh = state["optimizer"], opt.state_dict()
    try:
        _like(saved.get("param_groups"), fresh["param_groups"], "optimizer.param_groups")
        if set(saved) != {"state", "param_groups"} or not isinstance(saved["state"], dict):
            raise ValueError(t("optimizer: must hold exactly 'state' and 'param_groups'"))
        params = {
            i: p
            for g_saved, g in zip(saved["param_groups"], opt.param_groups, strict=True)
            for i, p in zip(g_saved["params"], g["params"], strict=True)
        }
        for i, entry in saved["state"].items():
            if i not in params or not isinstance(entry, dict) or not set(entry) <= {"step", "exp_avg", "exp_avg_sq"}:
                raise ValueError(t("optimizer.state: unexpected entry {entry}", entry=repr(i)))
            for k, v in entry.items():
                shape = () if k == "step" else params[i].shape
                if not isinstance(v, torch.Tensor) or v.shape != shape or not v.is_floating_point() or not bool(torch.isfinite(v).all()):
                    raise ValueError(
                        t("{where}: must be a finite float tensor of shape {shape}", where=f"optimizer.state[{i}].{k}", shape=tuple(shape))
                    )
        _like(state["scheduler"], sched.state_dict(), "scheduler")
        opt.load_state_dict(saved)
        sched.load_state_dict(state["scheduler"])
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CapsvizError(t("{path}: unusable training state: {why}", path=where, why=str(e).splitlines()[0][:300])) from None


def _like(saved, fresh, where: str) -> None:
    """`saved` has the structure and types of `fresh` (what this model's optimizer or schedule
    would save): the same keys, list lengths and kinds of value; numbers finite. Parameter ids
    and values may differ."""
    if isinstance(fresh, dict):
        if not isinstance(saved, dict) or set(saved) != set(fresh):
            raise ValueError(t("{where}: must hold the keys {keys}", where=where, keys=sorted(map(str, fresh))))
        for k in fresh:
            _like(saved[k], fresh[k], f"{where}.{k}")
    elif isinstance(fresh, list | tuple):
        if not isinstance(saved, list | tuple) or len(saved) != len(fresh):
            raise ValueError(t("{where}: must be a list of {n}", where=where, n=len(fresh)))
        for i, (a, b) in enumerate(zip(saved, fresh, strict=True)):
            _like(a, b, f"{where}[{i}]")
    elif isinstance(fresh, bool) or fresh is None or isinstance(fresh, str):
        if type(saved) is not type(fresh):
            raise ValueError(t("{where}: must be {kind}", where=where, kind=type(fresh).__name__))
    elif isinstance(fresh, int | float):
        if isinstance(saved, bool) or not isinstance(saved, int | float) or not math.isfinite(saved):
            raise ValueError(t("{where}: must be a finite number", where=where))
    elif isinstance(fresh, torch.Tensor):
        if not isinstance(saved, torch.Tensor) or saved.shape != fresh.shape:
            raise ValueError(t("{where}: must be a tensor of shape {shape}", where=where, shape=tuple(fresh.shape)))
