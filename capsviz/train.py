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
from capsviz.config import TrainRun, preset, to_dict
from capsviz.data import DATASETS, batches, load_split, num_batches, prefetch
from capsviz.devices import autocast, describe_hardware, pick_device
from capsviz.errors import CapsvizError
from capsviz.models import build_model, count_parameters
from capsviz.routing import compile_em
from capsviz.schema import CheckpointMeta


def default_decay_steps(dataset: str) -> int:
    """Steps per x0.96 learning-rate decay unless a run says otherwise (capsviz.config.Dataset)."""
    return DATASETS[dataset].decay_steps


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
    """The preset, sized for the dataset's images and 10 classes, with the run's overrides."""
    overrides = {"routing_iterations": run.routing_iterations, "in_size": DATASETS[run.dataset].in_size, "num_classes": 10}
    overrides |= {k: getattr(run, k) for k in preset(run.model).run_options}
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
def evaluate(model, dataset: str, data, *, batch_size=256, device="cpu", limit=None, precision="fp32", on_progress=None) -> dict:
    """Test error on `data` (its first `limit` images); `on_progress(done, total)` after each batch."""
    model.eval()
    total = len(data) if limit is None else min(limit, len(data))
    device = torch.device(device)
    right = seen = 0
    for x, y, _ in batches(dataset, data, batch_size, train=False, device=device, limit=limit):
        with autocast(device, precision):
            out = model(x)
        right += int(correct(out.scores.float(), y).sum())
        seen += len(y)
        if on_progress:
            on_progress(seen, total)
    rule = "both digits among the two most active capsules" if DATASETS[dataset].labels == 2 else "argmax of the class scores"
    return {
        "test_error": 100.0 * (1 - right / max(seen, 1)),
        "test_accuracy": 100.0 * right / max(seen, 1),
        "n_test": seen,
        "how": f"{dataset} test split, first {seen} images, {rule}, no augmentation",
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
) -> CheckpointMeta | None:
    """Train, save to `out` (safetensors) every epoch and at the end; return the final metadata
    (None in the processes of a distributed run other than rank 0, which write nothing)."""
    out = Path(out)
    emit = on_event or (lambda e: None)
    try:
        if int(os.environ.get("RANK", "0")) != 0:  # only rank 0 writes
            return _train(run, out, emit, stop or threading.Event(), resume)
        with ckpt.writer_lock(out):
            ckpt.recover(out)
            return _train(run, out, emit, stop or threading.Event(), resume)
    except CapsvizError as e:
        emit(Event("failed", message=str(e)))
        raise


def _train(run, out, emit, stop, resume):
    rank, world = _distributed()
    device = pick_device(run.device)
    if world > 1 and device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    state = None
    if resume:
        state = ckpt.load_train_state(resume)
        saved = TrainRun(**state["run"])
        run = replace(saved, epochs=run.epochs, device=run.device, data_dir=run.data_dir)
        if state["epoch"] >= run.epochs and state["batch"] == 0:
            raise CapsvizError(
                f"{resume} has already trained its {state['epoch']} epochs; ask for more with --epochs (e.g. --epochs {state['epoch'] + 1})"
            )
    torch.manual_seed(run.seed)
    cfg = model_config(run)
    model = build_model(cfg).to(device)
    started_from = None  # where a fine-tuned run began; total_training() sums the chain
    if state or run.init_from:
        source = resume if state else Path(run.init_from)
        loaded, source_meta = ckpt.load_checkpoint(source)
        if loaded.config != cfg:
            mine, theirs = to_dict(cfg), to_dict(loaded.config)
            diff = ", ".join(
                f"{k} {theirs.get(k)} there, {mine.get(k)} here"
                for k in sorted(mine.keys() | theirs.keys())
                if mine.get(k) != theirs.get(k)
            )
            raise CapsvizError(f"{source} holds a different model from the one this run trains: {diff}")
        model.load_state_dict(loaded.state_dict())
        # a resumed run keeps what its first part recorded; a fresh one records its source
        started_from = source_meta.started_from if state else ckpt.lineage(source, source_meta)
    train_set = load_split(run.dataset, "train", run.data_dir)
    test_set = load_split(run.dataset, "test", run.data_dir)
    n_train = len(train_set) if run.train_limit is None else min(run.train_limit, len(train_set))
    per_epoch = num_batches(n_train, run.batch_size, world)
    total = per_epoch * run.epochs
    opt = torch.optim.Adam(model.parameters(), lr=run.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: run.lr_decay ** (s / run.decay_steps))
    step, history, elapsed = 0, [], 0.0
    start_epoch, start_batch = 0, 0
    if state:
        load_optimizer_state(opt, sched, state, ckpt.train_state_path(resume))
        step, history, elapsed = state["step"], state["history"], state["elapsed"]
        start_epoch, start_batch = state["epoch"], state["batch"]
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
    if started_from:
        meta_base["started_from"] = started_from
    room = ckpt.pair_bytes(model)
    if rank == 0:
        ckpt.check_room(out, room)

    def save(epoch: int, batch: int, metrics: dict, final: bool):
        if rank != 0:
            return
        meta = dict(
            meta_base, epochs=epoch + batch / per_epoch, metrics=metrics, history=history, training_time_s=round(elapsed, 1), complete=final
        )
        ckpt.save_run(
            out,
            model,
            meta,
            {
                "run": asdict(run),
                "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(),
                "step": step,
                "epoch": epoch,
                "batch": batch,
                "history": history,
                "elapsed": elapsed,
                "torch_rng": torch.get_rng_state(),
            },
        )

    metrics = history[-1]["metrics"] if history else {}
    for epoch in range(start_epoch, run.epochs):
        if rank == 0 and epoch > start_epoch:  # the first was checked before the data loaded
            ckpt.check_room(out, room)
        net.train()
        t_epoch, seen, loss_sum, right, n_loss = time.perf_counter(), 0, 0.0, 0, 0
        first = start_batch if epoch == start_epoch else 0
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
            rank=rank,
            world=world,
        )
        if device.type == "cuda":  # assemble the next batch on the CPU while the GPU steps
            feed = prefetch(feed)
        for k, (x, y, target) in enumerate(feed, start=first):
            t0 = time.perf_counter()
            with autocast(device, run.precision):
                o = net(x, y)
                loss = objective(model, o, target, y, step / max(total, 1), run.margin_start)
            if not torch.isfinite(loss):
                raise CapsvizError(f"loss became {loss.item()} at step {step}; try a lower --lr or --precision fp32")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            dt = time.perf_counter() - t0
            elapsed += dt
            seen += len(y) * world
            loss_sum += loss.item() * len(y)
            n_loss += len(y)
            right += int(correct(o.scores.detach().float(), y).sum())
            ips = seen / (time.perf_counter() - t_epoch)
            if rank == 0:
                emit(
                    Event(
                        "step",
                        epoch,
                        step,
                        total,
                        loss_sum / n_loss,
                        100 * right / n_loss,
                        ips,
                        (total - step) * run.batch_size * world / max(ips, 1e-9),
                    )
                )
            if stop.is_set():
                save(epoch, k + 1, metrics, final=False)
                emit(Event("stopped", epoch, step, total, message=f"stopped at step {step}/{total}; resume with --resume {out}"))
                return ckpt.read_meta(out) if rank == 0 else None
        start_batch = 0
        if rank == 0:
            emit(
                Event(
                    "epoch",
                    epoch + 1,
                    step,
                    total,
                    loss_sum / max(n_loss, 1),
                    100 * right / max(n_loss, 1),
                    seen / (time.perf_counter() - t_epoch),
                )
            )
            metrics = evaluate(model, run.dataset, test_set, device=device, limit=run.test_limit, precision=run.precision)
            history.append(
                {
                    "epoch": epoch + 1,
                    "train_loss": loss_sum / max(n_loss, 1),
                    "train_accuracy": 100 * right / max(n_loss, 1),
                    "images_per_s": seen / (time.perf_counter() - t_epoch),
                    "metrics": metrics,
                }
            )
            emit(Event("evaluation", epoch + 1, step, total, metrics=metrics))
        save(epoch + 1, 0, metrics, final=epoch + 1 == run.epochs)
    if world > 1:
        digest = ckpt.weights_digest(model.state_dict())
        print(f"rank {rank} weights sha256 {digest}", flush=True)
        dist.barrier()
    if rank != 0:
        return None
    meta = ckpt.read_meta(out)
    emit(Event("finished", run.epochs, step, total, metrics=meta.metrics.to_dict(), message=f"saved {out}"))
    return meta


def load_optimizer_state(opt, sched, state: dict, where: Path) -> None:
    """A saved optimizer and schedule, refused in one line unless they fit this model: the same
    parameter groups and options, one entry per parameter with moments of its shape, all finite.
    (PyTorch checks only the number of parameters; a wrong shape would fail at the first step.)"""
    saved, fresh = state["optimizer"], opt.state_dict()
    try:
        _like(saved.get("param_groups"), fresh["param_groups"], "optimizer.param_groups")
        if set(saved) != {"state", "param_groups"} or not isinstance(saved["state"], dict):
            raise ValueError("optimizer: must hold exactly 'state' and 'param_groups'")
        params = {
            i: p
            for g_saved, g in zip(saved["param_groups"], opt.param_groups, strict=True)
            for i, p in zip(g_saved["params"], g["params"], strict=True)
        }
        for i, entry in saved["state"].items():
            if i not in params or not isinstance(entry, dict) or not set(entry) <= {"step", "exp_avg", "exp_avg_sq"}:
                raise ValueError(f"optimizer.state: unexpected entry {i!r}")
            for k, v in entry.items():
                shape = () if k == "step" else params[i].shape
                if not isinstance(v, torch.Tensor) or v.shape != shape or not v.is_floating_point() or not bool(torch.isfinite(v).all()):
                    raise ValueError(f"optimizer.state[{i}].{k}: must be a finite float tensor of shape {tuple(shape)}")
        _like(state["scheduler"], sched.state_dict(), "scheduler")
        opt.load_state_dict(saved)
        sched.load_state_dict(state["scheduler"])
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CapsvizError(f"{where}: unusable training state: {str(e).splitlines()[0][:300]}") from None


def _like(saved, fresh, where: str) -> None:
    """`saved` has the structure and types of `fresh` (what this model's optimizer or schedule
    would save): the same keys, list lengths and kinds of value; numbers finite. Parameter ids
    and values may differ."""
    if isinstance(fresh, dict):
        if not isinstance(saved, dict) or set(saved) != set(fresh):
            raise ValueError(f"{where}: must hold the keys {sorted(map(str, fresh))}")
        for k in fresh:
            _like(saved[k], fresh[k], f"{where}.{k}")
    elif isinstance(fresh, list | tuple):
        if not isinstance(saved, list | tuple) or len(saved) != len(fresh):
            raise ValueError(f"{where}: must be a list of {len(fresh)}")
        for i, (a, b) in enumerate(zip(saved, fresh, strict=True)):
            _like(a, b, f"{where}[{i}]")
    elif isinstance(fresh, bool) or fresh is None or isinstance(fresh, str):
        if type(saved) is not type(fresh):
            raise ValueError(f"{where}: must be {type(fresh).__name__}")
    elif isinstance(fresh, int | float):
        if isinstance(saved, bool) or not isinstance(saved, int | float) or not math.isfinite(saved):
            raise ValueError(f"{where}: must be a finite number")
    elif isinstance(fresh, torch.Tensor):
        if not isinstance(saved, torch.Tensor) or saved.shape != fresh.shape:
            raise ValueError(f"{where}: must be a tensor of shape {tuple(fresh.shape)}")


def steps_per_epoch(run: TrainRun) -> int:
    n = 60000 if run.train_limit is None else min(run.train_limit, 60000)
    return math.ceil(n / run.batch_size)
