"""The routing lab's measuring: a shared model run with another routing (`RunWith`), measured on fixed
test images (`measure`) into a `Row`, and what a model was trained with, as the lab names it."""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

import torch

from capsviz.analysis import rules
from capsviz.analysis.multimnist import pair_accuracy
from capsviz.analysis.robustness import attack_sweep, attack_test_images, predict_scores
from capsviz.analysis.routing import coupling_summary
from capsviz.data.affine import transform
from capsviz.registry import ROUTINGS, families_on, vector_routings

# The page's defaults, shared with the stored results
TEST_IMAGES = 10_000  # test error decides the sentences: the whole test set
IMAGES = 1_000  # shifted, attacked and MultiMNIST images, and the timing batch
COUPLING_IMAGES = 200  # images whose couplings are averaged
FGSM_EPSILON = 0.1  # one step of 0.1 on pixels in [0, 1]
SHIFT_PX = 3  # each test digit moved up to 3 px in x and y ...
ROTATE_DEG = 20  # ... and turned up to 20 degrees either way, by a seeded draw
ITERATIONS = 3  # dynamic routing's, as in Sabour et al.
TIME_BATCH = 100
TIMINGS = 7  # timings of the batch per row: a speed is claimed only from several (rules.faster)


def run_with_words(name: str) -> str:
    """A routing as the lab runs it, in plain words: its registry words, with the lab's
    iterations for an iterative one ("dynamic routing, 3 iterations")."""
    entry = ROUTINGS[name]
    return entry.words + (f", {ITERATIONS} iterations" if entry.iterative else "")


class _LabRoutings(Mapping):
    """The routings the lab runs (every vector-capsule routing in capsviz.registry.ROUTINGS, in its
    order) -> `run_with_words`; read from the registry at each look-up, so a routing added there is here."""

    def __getitem__(self, name: str) -> str:
        if name not in vector_routings():
            raise KeyError(name)
        return run_with_words(name)

    def __iter__(self):
        return iter(vector_routings())

    def __len__(self) -> int:
        return len(vector_routings())


LAB_ROUTINGS = _LabRoutings()


@dataclass(frozen=True)
class Settings:
    test_images: int = TEST_IMAGES
    images: int = IMAGES
    epsilon: float = FGSM_EPSILON
    iterations: int = ITERATIONS

    def as_dict(self) -> dict:
        return asdict(self) | {"shift_px": SHIFT_PX, "rotate_deg": ROTATE_DEG, "coupling_images": COUPLING_IMAGES}


NAMES = ("model", "trained_with", "run_with", "extra", "trained_label")


@dataclass
class Row:
    """One model run with one routing. Accuracies and errors in %, None where the measure does not
    apply (pair accuracy needs a model that reads MultiMNIST's 36x36 pairs)."""

    model: str
    trained_with: str
    run_with: str
    test_error: float
    n_test: int
    shifted_accuracy: float
    fgsm_accuracy: float
    n_images: int
    entropy_ratio: float  # mean coupling entropy / log J: 1 is uniform, 0 all of a vote to one class
    coupling_to_prediction: float  # mean coupling of a primary capsule to the predicted class (uniform: 1/J)
    ms_per_image: float  # the median of `ms_samples` (a single timing in rows stored before them) ...
    pair_accuracy: float | None = None
    n_pairs: int = 0
    classes: int = 10  # J: the uniform coupling is 1/J
    hardware: str = ""  # ... at batch TIME_BATCH on this machine ...
    load: float = 0.0  # ... while this many processes were running or waiting on average (os.getloadavg) ...
    cores: int = 0  # ... on this many cores (0: not recorded)
    ms_samples: tuple[float, ...] = ()  # each timing of the batch, ms per image
    extra: dict = field(default_factory=dict)
    trained_label: str = ""  # how the pages name what it was trained with (trained_label), where it differs from trained_with

    @property
    def trained(self) -> str:
        """What it was trained with, as the pages say it."""
        return self.trained_label or self.trained_with

    @property
    def error_words(self) -> str:
        """What its test error counts: single images; for a model that reads MultiMNIST pairs, single
        digits, which is not the pair error its zoo card quotes."""
        return "digit error" if self.pair_accuracy is not None else "test error"

    def stored(self) -> dict:
        """What is stored: the numbers and the machine's name (the names come from the model)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if k not in NAMES and v is not None}

    @classmethod
    def from_stored(cls, d: dict, model: str, trained: str, run_with: str, arch: str, label: str = "") -> Row:
        """The row stored as `d`; TypeError or ValueError where `d` is not one (a field missing,
        text where a number belongs, a count of no images)."""
        numbers = {k: d[k] for k in cls.__dataclass_fields__ if k not in NAMES and k in d}
        samples = numbers.pop("ms_samples", [])
        if not isinstance(samples, list | tuple) or not all(isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in samples):
            raise ValueError("ms_samples is not a list of times")
        for k, v in numbers.items():
            if k != "hardware" and not (v is None or (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v))):
                raise ValueError(f"{k} is not a number")
        if "hardware" in numbers and not isinstance(numbers["hardware"], str):
            raise ValueError("hardware is not text")
        row = cls(
            model=model,
            trained_with=trained,
            run_with=run_with,
            extra={"architecture": arch},
            ms_samples=tuple(samples),
            trained_label=label,
            **numbers,
        )
        if row.n_test < 1 or row.n_images < 1 or row.classes < 2:
            raise ValueError("a row measured on no images")
        return row

    @property
    def label(self) -> str:
        return f"{self.model} run with {self.run_with}"

    @property
    def timing(self) -> rules.Timing:
        """Its timings (one, in a row stored before repeated timings: no speed is claimed from it)."""
        return rules.Timing(self.ms_samples or (self.ms_per_image,))


class RunWith:
    """A shared model called with another routing: each call passes the routing and iterations,
    so the model (cached for every session) is never changed."""

    def __init__(self, model, routing: str, iterations: int | None = None):
        self.model, self.routing, self.iterations = model, routing, iterations
        self.config, self.decoder = model.config, model.decoder

    def __call__(self, x, *args, **kw):
        return self.model(x, *args, routing=self.routing, iterations=self.iterations, **kw)

    def classify(self, x):
        return self(x, reconstruct=False)


def trained_with(config) -> str:
    """The routing a model was trained with, in capsviz.registry.ROUTINGS' names: dynamic routing with one
    iteration is uniform couplings (b = 0, so softmax(b) is 1/J)."""
    couplings = getattr(config, "couplings", None) or config.routing
    if couplings == "dynamic" and getattr(config, "routing_iterations", 0) == 1:
        return "uniform"
    return couplings


def trained_label(config) -> str:
    """What a model was trained with as the pages name it: one iteration of dynamic routing keeps
    its own name (capsviz.analysis.zoo.ONE_ITERATION), with why it equals uniform couplings."""
    from capsviz.registry import ONE_ITERATION

    if trained_with(config) == "uniform" and (getattr(config, "couplings", None) or config.routing) == "dynamic":
        return f"{ONE_ITERATION} (couplings stay uniform)"
    return trained_with(config)


def architecture(meta, seed: bool = True) -> str:
    """What models that differ only in the routing they were trained with share: preset, data and
    schedule (epochs, batch, learning rate, the training images when fewer than all, and the seed
    unless `seed` is False). Only such models are compared as trained with."""
    run = meta.run or {}
    said = [preset_and_data(meta)]
    if meta.epochs is not None:
        said.append(f"{meta.epochs:g} epochs")
    if run.get("batch_size"):
        said.append(f"batch {run['batch_size']}")
    if run.get("lr"):
        said.append(f"lr {run['lr']:g} x{run.get('lr_decay', 1):g} per {run.get('decay_steps')} steps")
    if run.get("train_limit"):
        said.append(f"{run['train_limit']:,} training images")
    if seed and "seed" in run:
        said.append(f"seed {run['seed']}")
    return ", ".join(said)


def preset_and_data(meta) -> str:
    """The first part of `architecture`: which preset on which images (a user's by the name they
    were uploaded under, never by the server's folder)."""
    from capsviz.data.user import short_name

    return f"{(meta.run or {}).get('model') or meta.config.family} on {short_name(meta.image_dataset)}"


def fits(config) -> bool:
    """Whether the lab can swap this model's routing (its family entry lists the lab's page)."""
    return config.family in families_on("lab")


def shifted(x: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """x (N, C, S, S) with each image moved by up to SHIFT_PX pixels in x and y and turned by up to
    ROTATE_DEG degrees about the centre (its channels alike), drawn from `seed` (the same for every model)."""
    N, C, S, _ = x.shape
    g = torch.Generator().manual_seed(seed)
    u = lambda: torch.rand(N, generator=g) * 2 - 1  # noqa: E731 - uniform in [-1, 1]
    angle, dx, dy = u() * math.radians(ROTATE_DEG), u() * SHIFT_PX, u() * SHIFT_PX
    cos, sin = torch.cos(angle), torch.sin(angle)
    theta = torch.stack([torch.stack([cos, -sin, -2 * dx / S], -1), torch.stack([sin, cos, -2 * dy / S], -1)], -2)  # (N, 2, 3)
    planes = transform(x.reshape(N * C, S, S), theta.repeat_interleave(C, 0))  # (N*C, S, S)
    return planes.view(N, C, S, S)


def measure(
    model, name: str, routing: str, data, settings: Settings = Settings(), on_progress: Callable[[str], None] | None = None, arch: str = ""
) -> Row:
    """`model` (named `name`, of architecture `arch`) run with `routing` on the test set `data`
    (an ImageSet: 28x28 digits, or the user's images the model was trained on)."""
    say = on_progress or (lambda _: None)
    cfg = model.config
    run = RunWith(model, routing, settings.iterations if ROUTINGS[routing].iterative else None)
    n = min(settings.test_images, len(data))
    x, y = attack_test_images(data, n, cfg.in_size)
    say("test error")
    right = int((predict_scores(run, x).argmax(1) == y).sum())
    m = min(settings.images, n)
    say("shifted and rotated digits")
    xs = shifted(x[:m])
    shifted_acc = 100.0 * float((predict_scores(run, xs).argmax(1) == y[:m]).float().mean())
    say(f"FGSM at epsilon {settings.epsilon:g}")
    fgsm_acc = attack_sweep(run, x[:m], y[:m], [settings.epsilon]).accuracy[0]
    pairs, n_pairs = None, 0
    if cfg.in_size == 36 and data.images.dim() == 3:  # reads MultiMNIST's 36x36 pairs of MNIST digits
        say("MultiMNIST pairs")
        p = pair_accuracy(run, data.images, data.labels, n)  # as many pairs as test images: where routing is said to matter most
        pairs, n_pairs = p.accuracy, p.n
    say("couplings")
    with torch.no_grad():
        c = coupling_summary(model, x[:COUPLING_IMAGES], settings.iterations, routing=routing)
    say("time per image")
    samples = time_per_image(run, x[:TIME_BATCH])
    return Row(
        model=name,
        trained_with=trained_with(cfg),
        trained_label=trained_label(cfg),
        run_with=routing,
        test_error=100.0 * (n - right) / n,
        n_test=n,
        shifted_accuracy=shifted_acc,
        fgsm_accuracy=fgsm_acc,
        n_images=m,
        pair_accuracy=pairs,
        n_pairs=n_pairs,
        entropy_ratio=c["entropy"][-1] / c["uniform_entropy"],
        coupling_to_prediction=c["coupling_to_prediction"][-1],
        ms_per_image=statistics.median(samples),
        ms_samples=samples,
        classes=cfg.num_classes,
        hardware=hardware(),
        load=os.getloadavg()[0],
        cores=os.cpu_count() or 0,
        extra={"architecture": arch or cfg.family},
    )


def time_per_image(run, x: torch.Tensor, repeats: int = TIMINGS) -> tuple[float, ...]:
    """Milliseconds per image of the class scores at batch len(x), once per repeat."""
    return retime({"run": run}, x, repeats)["run"]


def retime(runs: dict[str, RunWith], x: torch.Tensor, repeats: int = TIMINGS) -> dict[str, tuple[float, ...]]:
    """Each of `runs` timed `repeats` times at batch len(x) (ms per image), taking turns, so that a
    change in the machine's load over the minute falls on all of them alike."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    with torch.no_grad():
        for run in runs.values():
            run.classify(x)  # untimed: the first call lays out weights and wakes the thread pool
        for _ in range(repeats):
            for name, run in runs.items():
                t = time.perf_counter()
                run.classify(x)
                samples[name].append(1000.0 * (time.perf_counter() - t) / len(x))
    return {name: tuple(v) for name, v in samples.items()}


def hardware() -> str:
    from capsviz.devices import describe_hardware

    return describe_hardware(torch.device("cpu"))


# What is compared without the time, which depends on the machine
MEASURES = ("test_error", "shifted_accuracy", "fgsm_accuracy", "pair_accuracy", "entropy_ratio", "coupling_to_prediction")


# The measures a routing is compared on: (field, its count field, words, higher is better)

COMPARED = (
    ("test_error", "n_test", "test error", False),
    ("shifted_accuracy", "n_images", "accuracy on shifted and turned images", True),
    ("fgsm_accuracy", "n_images", "accuracy under FGSM", True),
    ("pair_accuracy", "n_pairs", "MultiMNIST pair accuracy", True),
)


def vote_based() -> tuple[str, ...]:
    """The routings that compute the couplings from the votes (capsviz.registry.Routing.from_votes)."""
    return tuple(r for r in vector_routings() if ROUTINGS[r].from_votes)
