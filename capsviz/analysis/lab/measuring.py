"""The routing lab's measuring: a shared model run with another routing (`RunWith`), measured on fixed
test images (`measure`) into a `Row`, and what a model was trained with, as the lab names it."""

from __future__ import annotations

import math
import os
import re
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
from capsviz.i18n import N_, t, tn
from capsviz.registry import ONE_ITERATION, ROUTINGS, families_on, vector_routings

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
    if entry.iterative:
        return tn("{routing}, {n} iteration", "{routing}, {n} iterations", ITERATIONS, routing=t(entry.words))
    return t(entry.words)


def routing_name(name: str) -> str:
    """A routing as the lab's table and sentences name it ("dynamic", "uniform"): its registry
    entry's short name in the reader's language, or `name` for one the registry does not know."""
    entry = ROUTINGS.get(name)
    return t(entry.short) if entry is not None and entry.short else name


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
    trained_label: str = ""  # the catalog's name of what it was trained with (trained_label), where it differs from trained_with

    @property
    def trained(self) -> str:
        """What it was trained with: its own label in the reader's language where it has one (one
        iteration of dynamic routing, with why), else its routing's registry name."""
        if self.trained_label:
            return t("{routing} (couplings stay uniform)", routing=t(self.trained_label))
        return self.trained_with

    @property
    def trained_name(self) -> str:
        """`trained` as the lab's table and sentences say it: a routing by its name in the reader's language."""
        return self.trained if self.trained_label else routing_name(self.trained_with)

    @property
    def trained_short(self) -> str:
        """`trained` without the words on why: what a table's cell holds."""
        return t(self.trained_label) if self.trained_label else routing_name(self.trained_with)

    @property
    def error_words(self) -> str:
        """What its test error counts: single images; for a model that reads MultiMNIST pairs, single
        digits, which is not the pair error its zoo card quotes."""
        return t("digit error") if self.pair_accuracy is not None else t("test error")

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
    """The catalog's name of what a model was trained with where it is not its routing's: one
    iteration of dynamic routing keeps its own name (capsviz.registry.ONE_ITERATION), which
    `Row.trained` says with why it equals uniform couplings; "" for every other model. Kept in
    English (a message of the catalog), so a row says it in whichever language shows it."""
    if trained_with(config) == "uniform" and (getattr(config, "couplings", None) or config.routing) == "dynamic":
        return ONE_ITERATION
    return ""


def architecture(meta, seed: bool = True) -> str:
    """What models that differ only in the routing they were trained with share: preset, data and
    schedule (epochs, batch, learning rate, the training images when fewer than all, and the seed
    unless `seed` is False). Only such models are compared as trained with. A key (the seed
    studies store it, and name their files by it), so always English: `architecture_words` says it
    in the reader's language."""
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


# The parts of an `architecture` key after its preset and data, each with its message
_PARTS = (
    (re.compile(r"(?P<n>\S+) epochs"), N_("{n} epochs")),
    (re.compile(r"batch (?P<n>\S+)"), N_("batch {n}")),
    (re.compile(r"lr (?P<lr>\S+) x(?P<decay>\S+) per (?P<steps>\S+) steps"), N_("lr {lr} x{decay} per {steps} steps")),
    (re.compile(r"(?P<n>[\d,]+) training images"), N_("{n} training images")),
    (re.compile(r"seed (?P<n>\S+)"), N_("seed {n}")),
)


def architecture_words(arch: str) -> str:
    """An `architecture` key (or its first part, `preset_and_data`) in the reader's language: "capsnet-small
    on mnist, 3 epochs, batch 128" part by part; a part it does not know is left as it is."""
    first, *rest = arch.split(", ")
    model, on, data = first.partition(" on ")
    said = [t("{model} on {data}", model=model, data=data) if on else first]
    for part in rest:
        found = next(((m, message) for pattern, message in _PARTS if (m := pattern.fullmatch(part))), None)
        said.append(t(found[1], **found[0].groupdict()) if found else part)
    return t(", ").join(said)


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
    say = on_progress or (lambda _: None)  # words in the reader's language: a progress note
    cfg = model.config
    run = RunWith(model, routing, settings.iterations if ROUTINGS[routing].iterative else None)
    n = min(settings.test_images, len(data))
    x, y = attack_test_images(data, n, cfg.in_size)
    say(t("test error"))
    right = int((predict_scores(run, x).argmax(1) == y).sum())
    m = min(settings.images, n)
    say(t("shifted and rotated digits"))
    xs = shifted(x[:m])
    shifted_acc = 100.0 * float((predict_scores(run, xs).argmax(1) == y[:m]).float().mean())
    say(t("FGSM at epsilon {epsilon}", epsilon=f"{settings.epsilon:g}"))
    fgsm_acc = attack_sweep(run, x[:m], y[:m], [settings.epsilon]).accuracy[0]
    pairs, n_pairs = None, 0
    if cfg.in_size == 36 and data.images.dim() == 3:  # reads MultiMNIST's 36x36 pairs of MNIST digits
        say(t("MultiMNIST pairs"))
        p = pair_accuracy(run, data.images, data.labels, n)  # as many pairs as test images: where routing is said to matter most
        pairs, n_pairs = p.accuracy, p.n
    say(t("couplings"))
    with torch.no_grad():
        c = coupling_summary(model, x[:COUPLING_IMAGES], settings.iterations, routing=routing)
    say(t("time per image"))
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


# The measures a routing is compared on: (field, its count field, words (a catalog message), higher is better)
COMPARED = (
    ("test_error", "n_test", N_("test error"), False),
    ("shifted_accuracy", "n_images", N_("accuracy on shifted and turned images"), True),
    ("fgsm_accuracy", "n_images", N_("accuracy under FGSM"), True),
    ("pair_accuracy", "n_pairs", N_("MultiMNIST pair accuracy"), True),
)


def vote_based() -> tuple[str, ...]:
    """The routings that compute the couplings from the votes (capsviz.registry.Routing.from_votes)."""
    return tuple(r for r in vector_routings() if ROUTINGS[r].from_votes)
