"""Before a run: how much memory it needs and how long an epoch takes, on this machine.

Memory is counted, not guessed from a table: the layers before routing run on PyTorch's meta
device (shapes only, no memory, no arithmetic) and every tensor autograd keeps for the backward
pass is summed; the routing tensors, whose size grows with the number of capsules (with the
square of the image side for a CapsNet), follow from their shapes (B, J, I, D); weights count
four times (themselves, their gradients, Adam's two moments). Time is measured: a few real
training steps on random images at a small batch. `refusal` says in one line what does not fit
and what would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from capsviz.config import MIN_SIZE, ModelConfig, preset, to_dict
from capsviz.errors import CapsvizError
from capsviz.i18n import t
from capsviz.kernels import policy
from capsviz.models import build_model, count_parameters
from capsviz.progress import duration
from capsviz.registry import FAMILIES, ROUTINGS, resolve

GiB = 2**30
# A run is refused when it needs more than this share of the free memory: the process, the data
# feed and the allocator's slack need the rest.
USABLE = 0.9
# Activations kept for backward are met again by their gradients of the same size.
ACTIVATION_FACTOR = 2
SIDES = (256, 224, 192, 160, 128, 112, 96, 64, 48, 32, 28, 16, MIN_SIZE)  # sides a refusal may suggest
TIMED_BATCH = 16  # images per timed step: long enough to measure, short enough for a busy CPU


@dataclass(frozen=True)
class Estimate:
    """Bytes a training run needs, by part, and the time one epoch takes (None when not measured)."""

    size: int
    batch_size: int
    weights: int  # weights, gradients and Adam's two moments
    activations: int  # kept for backward, with their gradients (routing not included)
    routing: int  # votes and what routing keeps of their size
    images: int  # the training images in memory (uint8)
    available: int | None  # free memory on the device; None where it cannot be read
    device: str
    epoch_s: float | None = None
    n_images: int = 0
    timed: str = ""

    @property
    def total(self) -> int:
        return self.weights + self.activations + self.routing + self.images

    @property
    def fits(self) -> bool:
        return self.available is None or self.total <= USABLE * self.available

    def line(self) -> str:
        """One line for the CLI and the Train page, in the reader's language."""
        amounts = dict(weights=gib(self.weights), activations=gib(self.activations), routing=gib(self.routing), images=gib(self.images))
        if self.images:
            parts = t("weights and Adam {weights}, activations {activations}, routing {routing}, images {images}", **amounts)
        else:
            parts = t("weights and Adam {weights}, activations {activations}, routing {routing}", **amounts)
        said = dict(total=gib(self.total), device=self.device, free=gib(self.available), batch=self.batch_size, parts=parts)
        if self.available is not None:
            line = t("estimate: about {total} on {device} of {free} free at batch {batch} ({parts})", **said)
        else:
            line = t("estimate: about {total} on {device} at batch {batch} ({parts})", **said)
        if self.epoch_s is not None:
            line = t(
                "{estimate}; about {time} per epoch of {n} images ({how})",
                estimate=line,
                time=duration(self.epoch_s),
                n=f"{self.n_images:,}",
                how=self.timed,
            )
        return line


def gib(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / GiB:.0f} GiB" if n >= 10 * GiB else f"{n / GiB:.1f} GiB" if n >= GiB / 10 else f"{max(1, round(n / 2**20))} MiB"


def available_memory(device: torch.device) -> int | None:
    """Free bytes: the GPU's own (torch.cuda.mem_get_info), else MemAvailable of /proc/meminfo;
    None where neither can be read (the run is not refused then)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def per_image(config: ModelConfig) -> tuple[int, int]:
    """(activation bytes, routing bytes) that one training image adds, from a meta-device pass."""
    C, S = config.in_channels, config.in_size
    kept: list[int] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        kept.append(tensor.numel() * tensor.element_size())
        return tensor

    B = 2  # a batch of one would let some layers keep views instead of copies
    with torch.device("meta"):
        model = build_model(config)
        x = torch.zeros(B, C, S, S)
        y = torch.zeros(B, dtype=torch.long)
    count = FAMILIES[config.family].votes  # the family's own count of what training keeps (capsviz.entries.Family.votes)
    with policy.reference_only(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        if count is not None:
            votes = resolve(count)(model, config, x, y)
        else:
            model.loss(model(x, y), y, x)
            votes = 0
    # Routing tensors alive at once, in units of the votes: each routing's entry says how many (Routing.copies)
    routing = ROUTINGS.get(config.routing or "")
    copies = routing.copies if routing is not None else 0
    return ACTIVATION_FACTOR * sum(kept) // B, copies * votes * 4


def estimate(
    config: ModelConfig,
    batch_size: int,
    device="cpu",
    *,
    n_images: int = 0,
    available: int | None | str = "measure",
    time_it: bool = True,
) -> Estimate:
    """Memory for a training run of `config` at `batch_size`, and (`time_it`, when it fits) the
    time of an epoch of `n_images` measured on a few steps. `available` overrides the free memory."""
    device = torch.device(device)
    act, routing = per_image(config)
    weights = 4 * 4 * count_parameters_meta(config)
    free = available_memory(device) if available == "measure" else available
    images = n_images * config.in_channels * config.in_size**2 if device.type == "cpu" else 0
    est = Estimate(
        config.in_size, batch_size, weights, act * batch_size, routing * batch_size, images, free, _device_words(device), None, n_images
    )
    if time_it and est.fits and n_images:
        seconds, timed = time_steps(config, min(batch_size, TIMED_BATCH), device)
        est = Estimate(**{**est.__dict__, "epoch_s": seconds * n_images, "timed": timed})
    return est


def count_parameters_meta(config: ModelConfig) -> int:
    with torch.device("meta"):
        return count_parameters(build_model(config))


def _device_words(device: torch.device) -> str:
    return t("the GPU") if device.type == "cuda" else t("this machine") if device.type == "cpu" else device.type


def time_steps(config: ModelConfig, batch: int, device: torch.device, steps: int = 2) -> tuple[float, str]:
    """Seconds per image of a training step (forward, loss, backward, Adam), on random images:
    one warm-up step, then the mean of `steps`."""
    model = build_model(config).to(device).train()
    opt = torch.optim.Adam(model.parameters())
    g = torch.Generator().manual_seed(0)
    x = torch.rand(batch, config.in_channels, config.in_size, config.in_size, generator=g).to(device)
    y = torch.randint(0, config.num_classes, (batch,), generator=g).to(device)
    took = 0.0
    for k in range(steps + 1):
        t0 = time.perf_counter()
        loss = model.loss(model(x, y), y, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if k:
            took += time.perf_counter() - t0
    return took / steps / batch, t("measured on {steps} steps of {batch} images", steps=steps, batch=batch)


def suggestion(config: ModelConfig, batch_size: int, available: int, can_resize: bool, n_images: int = 0) -> str:
    """ "try --resize 64 or --batch-size 16": the largest side (at this batch) and the largest
    batch (at this side) that fit, as far as either does."""
    tries = []
    if can_resize:
        for side in (s for s in SIDES if s < config.in_size):
            smaller = resized(config, side)
            if smaller is not None and estimate(smaller, batch_size, available=available, n_images=n_images, time_it=False).fits:
                tries.append(f"--resize {side}")  # a flag: the same in every language
                break
    b = batch_size // 2
    while b >= 1:
        if estimate(config, b, available=available, n_images=n_images, time_it=False).fits:
            tries.append(f"--batch-size {b}")
            break
        b //= 2
    if len(tries) == 2:
        return t("try {first} or {second}", first=tries[0], second=tries[1])
    return t("try {option}", option=tries[0]) if tries else t("try a smaller model")


def resized(config: ModelConfig, side: int) -> ModelConfig | None:
    """The same model for side x side inputs; None where its layers leave nothing at that size."""
    from capsviz.config import config_from_dict

    cfg = config_from_dict({**to_dict(config), "in_size": side})
    if getattr(cfg, "problem", None):  # its layers leave nothing at this size, as the config itself says
        return None
    try:
        with torch.device("meta"):
            build_model(cfg)
    except (ValueError, RuntimeError, ZeroDivisionError):
        return None
    return cfg


def smallest_side(config: ModelConfig) -> int | None:
    """The smallest side of the pictures `config`'s layers leave something of (17 for a CapsNet's
    two 9x9 kernels); None when no side up to MAX_SIZE does."""
    from capsviz.config import MAX_SIZE, MIN_SIZE

    return next((side for side in range(MIN_SIZE, MAX_SIZE + 1) if resized(config, side) is not None), None)


def size_refusal(model: str, size: int, channels: int = 1, classes: int = 10) -> str | None:
    """None when the preset `model` takes size x size pictures; else one line saying so and the
    size that works (the preset's own, or the smallest its kernels take, whichever is larger),
    for the Train page before Start and for `capsviz train` before it reads a batch."""
    from capsviz.config import PRESETS

    config = for_preset(model, size, channels, classes)
    if resized(config, size) is not None:
        return None
    need = smallest_side(config)
    if need is None:
        return t("{model} takes no picture size up to the largest here; choose another model", model=model)
    use = max(PRESETS[model].in_size, need)
    return t(
        "{size}x{size} pictures are smaller than {model}'s kernels take (at least {need}x{need}); "
        "choose Make images {use} (--resize {use}) or another model",
        size=size,
        model=model,
        need=need,
        use=use,
    )


def refusal(est: Estimate, config: ModelConfig, can_resize: bool) -> str | None:
    """None when the run fits; else one line: what needs how much, what is free, what to try."""
    if est.fits:
        return None
    said = dict(
        size=est.size,
        total=gib(est.total),
        part=gib(max(est.routing, est.activations)),
        batch=est.batch_size,
        free=gib(est.available),
        device=est.device,
        fix=suggestion(config, est.batch_size, est.available, can_resize, est.n_images),
    )
    if est.routing >= est.activations:
        return t("{size}x{size} needs about {total} (routing {part}) at batch {batch}; {free} are free on {device}; {fix}", **said)
    return t("{size}x{size} needs about {total} (activations {part}) at batch {batch}; {free} are free on {device}; {fix}", **said)


def for_config(config: ModelConfig, batch_size: int, device="cpu", *, n_images: int = 0, can_resize: bool = True, **kw) -> Estimate:
    """The estimate, or CapsvizError with `refusal`'s line when the run will not fit."""
    est = estimate(config, batch_size, device, n_images=n_images, **kw)
    why = refusal(est, config, can_resize)
    if why:
        raise CapsvizError(why)
    return est


def for_run(run, time_it: bool = True) -> Estimate:
    """`for_config` for a training run (capsviz.config.TrainRun): its model sized for its dataset, on
    its device, over its training images; a smaller size is suggested for a user's images only."""
    from capsviz.config import user_dataset
    from capsviz.data import load_split
    from capsviz.devices import pick_device
    from capsviz.train import model_config

    n = len(load_split(run.dataset, "train", run.data_dir, run.resize))
    n = min(n, run.train_limit or n)
    can_resize = user_dataset(run.dataset) is not None
    return for_config(model_config(run), run.batch_size, pick_device(run.device), n_images=n, can_resize=can_resize, time_it=time_it)


def for_preset(name: str, size: int, channels: int = 1, classes: int = 10, **overrides) -> ModelConfig:
    """A preset sized for an input, as `capsviz.train.model_config` sizes it for a dataset."""
    return preset(name, in_size=size, in_channels=channels, num_classes=classes, **overrides)


__all__ = ["Estimate", "estimate", "for_config", "for_run", "refusal", "available_memory", "for_preset", "size_refusal", "smallest_side"]
