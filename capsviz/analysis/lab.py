"""The routing lab: the same capsules run with each routing, measured side by side.

Two axes: the routing a model was *trained with* (its checkpoint's couplings) and the routing it
is *run with* here (any vector-capsule routing of `capsviz.registry.ROUTINGS`, for the call only: the
shared model is not changed). Every measure is on fixed test images, so a stored result equals a fresh run, except the
time per image, which belongs to the machine that measured it.

    python -m capsviz.analysis.lab           # the lab's default results for every shipped model
    python -m capsviz.analysis.lab --table   # the stored ones as a markdown table and sentences
    python -m capsviz.analysis.lab --retime  # their time per image again (stored only if the machine is not busy)
    python -m capsviz.analysis.lab --seeds RUN.safetensors ...  # a seed study of finished runs, stored
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from capsviz.analysis import rules, stored
from capsviz.analysis.multimnist import pair_accuracy
from capsviz.analysis.reproduction import PAPER
from capsviz.analysis.robustness import attack_sweep, attack_test_images, predict_scores
from capsviz.analysis.routing import coupling_summary
from capsviz.analysis.rules import noise, spread
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
        hardware=_hardware(),
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


def _hardware() -> str:
    from capsviz.devices import describe_hardware

    return describe_hardware(torch.device("cpu"))


# What is compared without the time, which depends on the machine
MEASURES = ("test_error", "shifted_accuracy", "fgsm_accuracy", "pair_accuracy", "entropy_ratio", "coupling_to_prediction")


def key(model_path: Path, routing: str, dataset: str, settings: Settings) -> str:
    spec = {"routing": routing, "dataset": dataset, **settings.as_dict()}
    if dataset == "multimnist":
        spec["pairs"] = settings.test_images
    return stored.sweep_key(model_path, "lab", spec)


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


TIME_RULE = rules.RULES["faster"] + " " + rules.RULES["busy"]  # said beside the times

MASKING = (
    "Where a routing does better under FGSM than the one a model was trained with, that can also mean the attack's "
    "gradient passes less well through it (gradient masking) rather than a sturdier model; the Robustness page's BIM "
    "attack tests that more strongly."
)


@dataclass
class Report:
    """What the page says about its rows, in the order it says it. `short`: the short answer to the
    page's question (a few sentences the table supports); `hidden`: what a routing hidden under
    "Run with" leaves out; `models`: each model's details (model -> sentences); `across`: what
    compares models with one another."""

    short: list[str]
    hidden: list[str]
    models: dict[str, list[str]]
    across: list[str]

    def lines(self) -> list[str]:
        return self.short + self.hidden + [line for said in self.models.values() for line in said] + self.across


def sentences(rows: list[Row], studies: list[SeedStudy] = ()) -> list[str]:
    """Every sentence of `report`, in its order."""
    return report(rows, studies).lines()


def report(rows: list[Row], studies: list[SeedStudy] = ()) -> Report:
    """Plain sentences on what `rows` show: the short answer; per model, each routing it was run with
    against the one it was trained with, measure by measure, how far the vote-based routings move
    its couplings from uniform, and what dynamic routing costs in time; across models of one
    architecture trained with different routings, their errors. A difference is called one only
    beyond chance (rules.beyond_chance), a speed only by rules.faster on a machine that was not busy."""
    by_model = _by_model(rows)
    models, masked = {}, False
    for name, rs in by_model.items():
        own = _own(rs)
        said = [_against(name, r, own) for r in rs.values() if own is not None and r is not own]
        masked = masked or any(_verdict(r, own, "fgsm_accuracy", "n_images", True) == "better" for r in rs.values() if own is not None)
        said += [_coupling(r) for r in rs.values() if r.run_with in vote_based()]
        if (t := _time(name, rs)) is not None:
            said.append(t)
        models[name] = said
    across = _trained_with(rows, studies) + ([MASKING] if masked else [])
    return Report(short_answer(rows), hidden(rows), models, across)


def _by_model(rows: list[Row]) -> dict[str, dict[str, Row]]:
    by: dict[str, dict[str, Row]] = {}
    for r in rows:
        by.setdefault(r.model, {})[r.run_with] = r
    return by


def _own(rs: dict[str, Row]) -> Row | None:
    """The row of a model run with the routing it was trained with, if it is shown."""
    return next((r for r in rs.values() if r.run_with == r.trained_with), None)


def _verdict(r: Row, own: Row, field_: str, count: str, higher: bool) -> str | None:
    """ "better" or "worse" where r's `field_` differs from own's beyond chance, else None."""
    a, b = getattr(r, field_), getattr(own, field_)
    if a is None or b is None or not rules.beyond_chance(a, getattr(r, count), b, getattr(own, count)):
        return None
    return "better" if (a > b) == higher else "worse"


def _against(name: str, r: Row, own: Row) -> str:
    parts, better, worse = [], [], []
    for field_, count, words, higher in COMPARED:
        a, b = getattr(r, field_), getattr(own, field_)
        if a is None or b is None:
            continue
        words = r.error_words if field_ == "test_error" else words
        band = noise(a, getattr(r, count), b, getattr(own, count))
        verdict = _verdict(r, own, field_, count, higher)
        if verdict is None:
            parts.append(f"{words} {a:.2f}% against {b:.2f}% (within chance, ±{band:.2f})")
            continue
        (better if verdict == "better" else worse).append(words)
        parts.append(f"{words} {a:.2f}% against {b:.2f}% ({verdict}, beyond ±{band:.2f})")
    if not better and not worse:
        verdict = (
            f"no measure differs beyond chance: on these test images, {r.run_with} and {own.run_with} cannot be told apart "
            "on this model (a smaller difference than chance gives may still be there)."
        )
    else:
        verdict = (
            (f"better on {', '.join(better)}" if better else "")
            + ("; " if better and worse else "")
            + (f"worse on {', '.join(worse)}" if worse else "")
            + "."
        )
    return f"**{name}** (trained with {own.trained}) run with **{r.run_with}** instead: " + "; ".join(parts) + f". So {verdict}"


def _groups(rows: list[Row]) -> dict[str, list[Row]]:
    """Models of one architecture and schedule trained with two routings or more, each run with its own."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.run_with == r.trained_with:
            groups.setdefault(r.extra.get("architecture", r.model), []).append(r)
    return {arch: rs for arch, rs in groups.items() if len({r.trained_with for r in rs}) > 1}


def _trained_with(rows: list[Row], studies: list[SeedStudy] = ()) -> list[str]:
    """Models of one architecture trained with different routings, each run with its own, on test
    error and (models that read MultiMNIST) pair accuracy; the seed study of the same preset and
    data, where there is one, says how far seeds alone move them."""
    said = []
    for arch, rs in _groups(rows).items():
        parts = [_gap(rs, "test_error", "n_test", rs[0].error_words, "test images", higher=False)]
        if all(r.pair_accuracy is not None for r in rs):
            parts.append(_gap(rs, "pair_accuracy", "n_pairs", "MultiMNIST pair accuracy", "pairs", higher=True))
        study = next((st for st in studies if st.preset_and_data == arch.split(",")[0]), None)
        seeds = (
            "One training seed each; how far the seed alone moves these models was not measured, so a gap here may be the seed's."
            if study is None
            else f"One training seed each; how far the seed alone moves such models is measured below ({len(study.seeds)} seeds per routing, a shorter schedule)."
        )
        said.append(
            f"The models of one architecture and schedule ({arch}) trained with different routings, each run with its own: "
            + " ".join(parts)
            + f" {seeds}"
        )
    return said


def _ranked(rs: list[Row], field_: str, count: str, higher: bool) -> tuple[list[Row], bool, float]:
    """The rows from best to worst on `field_`, whether the best and the worst differ beyond chance,
    and the chance band of that difference."""
    rs = sorted(rs, key=lambda r: getattr(r, field_), reverse=higher)
    best, worst = rs[0], rs[-1]
    a, b, na, nb = getattr(best, field_), getattr(worst, field_), getattr(best, count), getattr(worst, count)
    return rs, rules.beyond_chance(a, na, b, nb), noise(a, na, b, nb)


def _gap(rs: list[Row], field_: str, count: str, words: str, unit: str, higher: bool) -> str:
    """The models' `field_` from best to worst, and whether the largest gap is beyond chance."""
    rs, beyond, band = _ranked(rs, field_, count, higher)
    best, worst = rs[0], rs[-1]
    gap = abs(getattr(best, field_) - getattr(worst, field_))
    listing = ", ".join(f"{r.trained} {getattr(r, field_):.2f}%" for r in rs)
    if beyond:
        verdict = f"trained with {best.trained} is best, {gap:.2f} points ahead of {worst.trained}, more than the ±{band:.2f} chance gives"
    else:
        verdict = (
            f"the largest gap, {gap:.2f} points, is within the ±{band:.2f} chance gives: on this measure, none of these "
            "routings trained a model better than another beyond chance"
        )
    return f"{words} on {getattr(best, count):,} {unit}, best first: {listing}; {verdict}."


def _coupling(r: Row) -> str:
    """How far a routing that computes the couplings from the votes moves them from uniform, by
    both parts of the near-uniform rule (rules.uniform_words)."""
    what = ROUTINGS[r.run_with].words
    return (
        f"With {what}, **{r.model}**'s couplings, set beside the uniform split (each class 1/{r.classes} of a vote), are "
        f"{rules.uniform_words(r.entropy_ratio, r.coupling_to_prediction, 1 / r.classes)} (averaged over {COUPLING_IMAGES} images)."
    )


def _time(name: str, rs: dict[str, Row]) -> str | None:
    """What dynamic routing costs in time against uniform couplings: a speed is claimed only from
    repeated timings on one machine that was not busy (rules.faster, rules.busy), else the times
    are given and why nothing is said about them."""
    if "dynamic" not in rs or "uniform" not in rs:
        return None
    d, u = rs["dynamic"], rs["uniform"]
    load, cores = max(d.load, u.load), min(d.cores, u.cores)
    other = "one pass with uniform couplings"
    if d.hardware != u.hardware:
        why = "they were timed on different machines"
    elif min(len(d.timing.samples), len(u.timing.samples)) < rules.MIN_TIMINGS:
        why = f"a speed is claimed only from {rules.MIN_TIMINGS} timings or more of each"
    elif cores < 1:
        why = "the machine's number of cores was not recorded, so whether it was busy is not known"
    elif rules.busy(load, cores):
        why = f"the machine was busy while timing them (load {load:.1f} on {cores} cores)"
    else:
        return f"On **{name}**, " + rules.time_words("dynamic routing", d.timing, other, u.timing) + f" (Load {load:.1f} on {cores} cores.)"
    return (
        f"On **{name}**, dynamic routing takes {d.timing.words()} per image against {u.timing.words()} for {other}; {why}, "
        "so nothing is said about which is faster."
    )


def _of(k: int, n: int) -> str:
    return "this model" if n == 1 else f"{k} of {n} models"


def _routings(names) -> str:
    """The routings among `names`, in the lab's order: "dynamic, uniform or self-attention"; a
    label of its own (one iteration of dynamic routing, trained_label) after them."""
    given = set(names)
    names = [r for r in vector_routings() if r in given] + sorted(given - set(vector_routings()))
    return ", ".join(names[:-1]) + (" or " if len(names) > 1 else "") + names[-1]


def _judged(r: Row, own: Row) -> tuple[str, str, str, bool]:
    """The measure a model run with another routing is judged by in the short answer, as COMPARED
    gives it: pair accuracy for a model that reads MultiMNIST pairs (the task it was trained for),
    else the test error."""
    if r.pair_accuracy is not None and own.pair_accuracy is not None:
        return "pair_accuracy", "n_pairs", "pair accuracy", True
    return "test_error", "n_test", "test error", False


VERDICT_WORDS = {"worse": "worse beyond chance", "better": "better beyond chance", None: "within chance"}


def _outcomes(pairs: list[tuple[Row, Row]], field_: str, count: str, higher: bool) -> str:
    """How many of `pairs` (a model run with another routing, and with its own) stay within chance on
    `field_`, how many do better or worse beyond it, each with the largest changes quoted as the
    table gives them."""
    outcome: dict[str | None, list[tuple[Row, Row]]] = {"worse": [], "better": [], None: []}
    for r, own in pairs:
        outcome[_verdict(r, own, field_, count, higher)].append((r, own))
    parts = []
    for verdict, words in VERDICT_WORDS.items():
        got = sorted(outcome[verdict], key=lambda p: -abs(getattr(p[0], field_) - getattr(p[1], field_)))
        if not got:
            continue
        quoted = ", ".join(f"**{r.model}** {getattr(r, field_):.2f}% against {getattr(own, field_):.2f}%" for r, own in got[:2])
        more = f" and {len(got) - 2} more" if len(got) > 2 else ""
        largest = "largest changes first: " if verdict is None and len(got) > 1 else ""
        parts.append((len(got), f"{words} on {_of(len(got), len(pairs))} ({largest}{quoted}{more})"))
    parts.sort(key=lambda p: -p[0])
    return "; ".join(p for _, p in parts)


def _digit_differs(pairs: list[tuple[Row, Row]]) -> str:
    """For models judged by pair accuracy: where their digit error (one digit alone) gives another verdict, said with its numbers."""
    differ = []
    for r, own in pairs:
        digit = _verdict(r, own, "test_error", "n_test", False)
        if digit != _verdict(r, own, "pair_accuracy", "n_pairs", True):
            differ.append(f"on **{r.model}**: {VERDICT_WORDS[digit]}, {r.test_error:.2f}% against {own.test_error:.2f}%")
    return f" By digit error alone (one digit in the frame), the verdict differs {'; '.join(differ)}." if differ else ""


def _pair_counts(pairs: list[tuple[Row, Row]]) -> str:
    counts = {r.n_pairs for r, own in pairs} | {own.n_pairs for _, own in pairs}
    return f"{counts.pop():,} test pairs" if len(counts) == 1 else "their test pairs"


def _swap(by_model: dict[str, dict[str, Row]], routing: str, lead: str, trained: tuple[str, ...]) -> str | None:
    """How the models trained with one of `trained` fare when they are run with `routing` instead:
    by test error, or by pair accuracy for the models that read MultiMNIST pairs (`_judged`), how
    many stay within chance, how many do better or worse beyond it."""
    pairs = [(rs[routing], own) for rs in by_model.values() if (own := _own(rs)) and own.trained_with in trained and routing in rs]
    if not pairs:
        return None
    single = [(r, own) for r, own in pairs if _judged(r, own)[0] == "test_error"]
    paired = [(r, own) for r, own in pairs if _judged(r, own)[0] == "pair_accuracy"]
    said = []
    if single:
        whose = f"for the {len(single)} that read one image at a time, " if paired else ""
        said.append(whose + "the test error is " + _outcomes(single, "test_error", "n_test", False))
    if paired:
        task = "the task they were trained for" if len(paired) > 1 else "the task it was trained for"
        whose = f"for the {len(paired)} that read MultiMNIST pairs, judged" if single else "judged"
        said.append(
            f"{whose} by pair accuracy on {_pair_counts(paired)} ({task}{'' if single else ', reading MultiMNIST pairs'}), "
            "the pair accuracy is " + _outcomes(paired, "pair_accuracy", "n_pairs", True)
        )
    trained_with = _routings(own.trained for _, own in pairs)
    what = "what it was trained with" if len(pairs) == 1 else "what they were trained with"
    return f"{lead} instead of {what} ({trained_with}), " + "; ".join(said) + "." + _digit_differs(paired)


def _better(by_model: dict[str, dict[str, Row]]) -> str | None:
    """Every model that does better beyond chance run with another routing than with its own, by the
    measure it is judged by (`_judged`); and a model that reads pairs whose digit error alone would
    say so while its pair accuracy does not."""
    compared, better, digit = 0, [], {}
    for rs in by_model.values():
        if (own := _own(rs)) is None:
            continue
        for r in rs.values():
            if r is own:
                continue
            compared += 1
            field_, count, words, higher = _judged(r, own)
            if _verdict(r, own, field_, count, higher) == "better":
                better.append(
                    f"**{r.model}** (trained with {own.trained}) run with {r.run_with}: {words} "
                    f"{getattr(r, field_):.2f}% against {getattr(own, field_):.2f}%"
                )
            elif field_ == "pair_accuracy" and _verdict(r, own, "test_error", "n_test", False) == "better":
                verdict = VERDICT_WORDS[_verdict(r, own, field_, count, higher)]
                digit.setdefault((r.model, own.trained), []).append(
                    f"run with {r.run_with}, digit error {r.test_error:.2f}% against {own.test_error:.2f}% but pair accuracy "
                    f"{r.pair_accuracy:.2f}% against {own.pair_accuracy:.2f}% ({verdict})"
                )
    if not compared:
        return None
    measure = "by test error, or pair accuracy for a model that reads MultiMNIST pairs"
    said = (
        f"**Better with another routing.** Beyond chance, {measure}: " + "; ".join(better) + "."
        if better
        else f"**Better with another routing.** No model does better beyond chance run with another routing than with its own, {measure}."
    )
    for (model, trained), runs in digit.items():
        said += (
            f" By digit error alone (one digit in the frame), **{model}** (trained with {trained}) would look better: "
            + "; ".join(runs)
            + "."
        )
    return said


NO_ANSWER = (
    "Nothing shown here answers it: the short answer sets a model run with uniform or fixed random couplings beside its "
    "own routing, models trained with different routings beside one another, and dynamic routing's couplings beside "
    "the uniform split, and none of these is among the rows shown."
)


def short_answer(rows: list[Row]) -> list[str]:
    """Does routing matter? The few sentences the table supports: the test error (pair accuracy for a
    model that reads MultiMNIST pairs) with uniform couplings (no routing) and with fixed random
    couplings in place of a model's own routing; every model that does better with another routing; models
    of one architecture trained with different routings; how far dynamic routing moves the couplings.
    Each quotes the table's own numbers."""
    by_model = _by_model(rows)
    said = [
        _swap(by_model, "uniform", f"**Run without routing.** Run with {run_with_words('uniform')}", vote_based()),
        _swap(
            by_model,
            "random",
            f"**Random couplings.** Run with {run_with_words('random')}",
            tuple(r for r in vector_routings() if r != "random"),
        ),
        _better(by_model),
    ]
    groups = []
    for arch, rs in _groups(rows).items():
        text = arch.split(",")[0] + ": "
        for field_, count, words, higher in (
            ("test_error", "n_test", rs[0].error_words, False),
            ("pair_accuracy", "n_pairs", "pair accuracy", True),
        ):
            if field_ == "pair_accuracy" and not all(r.pair_accuracy is not None for r in rs):
                continue
            ranked, beyond, _ = _ranked(rs, field_, count, higher)
            listing = ", ".join(f"{r.trained} {getattr(r, field_):.2f}%" for r in ranked)
            verdict = (
                f"{ranked[0].trained} ahead of {ranked[-1].trained} beyond chance, but with one training seed each this gap may be the seed's"
                if beyond
                else "no gap beyond chance"
            )
            text += f"{'' if field_ == 'test_error' else '; '}{words} {listing} ({verdict})"
        groups.append(text)
    if groups:
        said.append(
            "**Trained with.** Models of one preset and schedule trained with different routings, each run with its own "
            "(one training seed each, so a gap may be the seed's): " + "; ".join(groups) + "."
        )
    dynamic = [r for r in rows if r.run_with == "dynamic"]
    if dynamic:
        near = [r for r in dynamic if rules.near_uniform(r.entropy_ratio, r.coupling_to_prediction, 1 / r.classes)]
        away = sorted((r for r in dynamic if r not in near), key=lambda r: r.entropy_ratio)
        rule = (
            f"more than {rules.NEAR_UNIFORM_ENTROPY:.0%} of the uniform split's entropy and less than "
            f"{rules.NEAR_UNIFORM_SHARE} times the uniform share of a vote to the predicted class"
        )
        parts = []
        if near:
            lo, hi = min(r.entropy_ratio for r in near), max(r.entropy_ratio for r in near)
            kept = f"{100 * lo:.1f}%" if f"{100 * lo:.1f}" == f"{100 * hi:.1f}" else f"{100 * lo:.1f}% to {100 * hi:.1f}%"
            parts.append(
                f"leaves the couplings near uniform on {_of(len(near), len(dynamic))} (they keep {kept} of the uniform split's entropy)"
            )
        if away:
            quoted = ", ".join(
                f"**{r.model}**: {100 * r.entropy_ratio:.1f}% of the entropy, {r.coupling_to_prediction:.2f} to the predicted class "
                f"against the uniform {1 / r.classes:.2f}"
                for r in away[:2]
            )
            more = f" and {len(away) - 2} more" if len(away) > 2 else ""
            them = "them" if near else "the couplings"
            parts.append(f"moves {them} away from uniform on {_of(len(away), len(dynamic))} ({quoted}{more})")
        said.append(f"**Couplings.** By the near-uniform rule ({rule}), dynamic routing " + "; it ".join(parts) + ".")
    return [s for s in said if s] or [NO_ANSWER]


def hidden(rows: list[Row]) -> list[str]:
    """A note on what the routings hidden under "Run with" leave out of the sentences (nothing is
    dropped without one)."""
    shown = {r.run_with for r in rows}
    off = [r for r in vector_routings() if r not in shown]
    if not rows or not off:
        return []
    lost = []
    untied: dict[str, set[str]] = {}
    for r in rows:
        if r.trained_with not in shown:
            untied.setdefault(r.trained, set()).add(r.model)
    for routing, names in untied.items():
        listed = ", ".join(f"**{n}**" for n in sorted(names))
        lost.append(
            f"how {listed}, trained with {routing}, fare with other routings than their own (in the short answer and in "
            "their details) and beside models trained otherwise"
        )
    if "uniform" in off:
        lost.append("the short answer on running without routing (uniform couplings)")
    if "random" in off:
        lost.append("the short answer on fixed random couplings")
    lost.append(f"whether a model does better run with {_routings(off)} than with its own (the short answer)")
    lost += [f"how far {ROUTINGS[r].words} moves the couplings from uniform" for r in off if ROUTINGS[r].from_votes]
    if "dynamic" in off or "uniform" in off:
        lost.append("the time of dynamic routing against uniform couplings")
    return [
        f"Hidden under *Run with*: {', '.join(off)}. Left out with {'it' if len(off) == 1 else 'them'}: "
        + "; ".join(lost)
        + ". Choose every routing to see them."
    ]


@dataclass(frozen=True)
class SeedStudy:
    """Models of one preset, data and schedule trained with each routing from several seeds: how
    much of a gap between routings the seeds alone make. `errors`: trained-with routing -> test
    error % per seed, in the order of `seeds`."""

    architecture: str  # what every model shares, the seed left out
    seeds: tuple[int, ...]
    errors: dict[str, list[float]]
    n_test: int
    hardware: str = ""
    models: tuple[str, ...] = ()  # made of these models in the model folder; () for a stored study
    shipped: bool = False  # stored with the app (checkpoints/sweeps), not made on this server

    @property
    def preset_and_data(self) -> str:
        return self.architecture.split(",")[0]

    def title(self, say=str) -> str:
        """Whose study it is: one that came with the app is the preset's; one made of models in
        the model folder (a student's runs, say) is named by them, never by the preset alone.
        `say`: how a name from a file is written (the pages make it plain)."""
        if self.shipped:
            return f"Trained with, over {len(self.seeds)} seeds: {say(self.preset_and_data)}"
        if self.models:
            listed = ", ".join(say(m) for m in self.models[:4]) + (f" and {len(self.models) - 4} more" if len(self.models) > 4 else "")
            return f"Trained here, over {len(self.seeds)} seeds: {say(self.preset_and_data)} (the models {listed})"
        return f"Stored on this machine, over {len(self.seeds)} seeds: {say(self.preset_and_data)}"

    def stored(self) -> dict:
        return {"architecture": self.architecture, "seeds": list(self.seeds), "n_test": self.n_test, "hardware": self.hardware} | {
            r: list(e) for r, e in self.errors.items()
        }

    @classmethod
    def from_stored(cls, d: dict, shipped: bool = False) -> SeedStudy:
        """The study stored as `d`; KeyError, TypeError or ValueError where it is not one."""
        seeds = tuple(int(s) for s in d["seeds"])
        errors = {r: [float(e) for e in d[r]] for r in vector_routings() if r in d}
        if len(seeds) < 2 or len(set(seeds)) != len(seeds):
            raise ValueError("a seed study needs two seeds or more, each once")
        if not errors or any(len(e) != len(seeds) or not all(0 <= x <= 100 for x in e) for e in errors.values()):
            raise ValueError("a seed study needs one error (0 to 100%) per seed for every routing")
        if not isinstance(d["architecture"], str) or int(d["n_test"]) < 1:
            raise ValueError("a seed study names its schedule and was tested on some images")
        return cls(d["architecture"], seeds, errors, int(d["n_test"]), str(d.get("hardware", "")), shipped=shipped)


def seed_study(metas) -> SeedStudy:
    """The study made of checkpoints' metadata: every routing must have the same seeds, and every
    model the same preset, data and schedule; raise ValueError naming what differs."""
    metas = list(metas)
    shared = {architecture(m, seed=False) for m in metas}
    if len(shared) != 1 or len({m.image_dataset for m in metas}) != 1:
        raise ValueError(f"the models differ in more than routing and seed: {sorted(shared)}")
    errors: dict[str, dict[int, float]] = {}
    for m in metas:
        seed = (m.run or {}).get("seed")
        if seed is None or m.metrics.test_error is None:
            raise ValueError("every model needs its training seed and test error recorded")
        errors.setdefault(trained_with(m.config), {})[int(seed)] = m.metrics.test_error
    seeds = sorted(next(iter(errors.values())))
    if len(seeds) < 2 or any(sorted(e) != seeds for e in errors.values()):
        raise ValueError("every routing needs the same seeds, at least two")
    n_test = {m.metrics.n_test for m in metas}
    if len(n_test) != 1:
        raise ValueError(f"the models were tested on different numbers of images: {sorted(n_test)}")
    hardware = sorted({m.hardware or "" for m in metas})
    ordered = {r: [errors[r][s] for s in seeds] for r in vector_routings() if r in errors}  # the lab's order of routings
    return SeedStudy(shared.pop(), tuple(seeds), ordered, n_test.pop(), "; ".join(hardware)[:MAX_HARDWARE])


MAX_HARDWARE = 200


def studies_in(metas, names=None) -> list[SeedStudy]:
    """The seed studies a model folder holds: models of one preset, data and schedule trained with
    the same seeds for every routing they were trained with (trained from the Train page, say).
    `names`: the models' names, in the order of `metas`, which each study then lists."""
    metas = list(metas)
    names = list(names) if names is not None else [""] * len(metas)
    groups: dict[str, list] = {}
    for m, name in zip(metas, names, strict=True):
        if m.metrics.test_error is not None and "seed" in (m.run or {}):
            groups.setdefault((architecture(m, seed=False), m.image_dataset), []).append((m, name))
    found = []
    for group in groups.values():
        try:
            study = seed_study(m for m, _ in group)
        except ValueError:  # one seed, or routings with different seeds: not a study
            continue
        found.append(replace(study, models=tuple(sorted(n for _, n in group if n))))
    return found


def seeds_key(study: SeedStudy) -> str:
    slug = "-".join("".join(ch if ch.isalnum() else " " for ch in study.architecture.lower()).split())[:80]
    return f"seeds-{slug}"


def stored_studies(folders: list[Path] | None = None, skipped: list[str] | None = None) -> list[SeedStudy]:
    """Every seed study stored in `folders` (the shipped sweeps, then this machine's), those of the
    shipped folder marked as shipped. A file that is not a study is left out, its name added to
    `skipped` (for the page's note)."""
    studies, seen = [], set()
    shipped = stored.shipped_folder().resolve()
    for folder in folders or [stored.shipped_folder(), stored.local_folder()]:
        for path in sorted(folder.glob("seeds-*.json")) if folder.is_dir() else []:
            value = stored.read(path.stem, [folder])
            try:
                if value is None:
                    raise ValueError("not a stored result")
                study = SeedStudy.from_stored(value, shipped=folder.resolve() == shipped)
            except (KeyError, TypeError, ValueError, OverflowError):
                if skipped is not None:
                    skipped.append(path.name)
                continue
            if study.architecture not in seen:
                seen.add(study.architecture)
                studies.append(study)
    return studies


def mean_sd(values: list[float]) -> tuple[float, float]:
    m = sum(values) / len(values)
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / max(len(values) - 1, 1))


def seed_sentences(study: SeedStudy) -> list[str]:
    """What the study shows: each routing's mean error over the seeds and their spread, and each
    pair of routings compared against what the seeds alone give (two standard errors of the
    difference of two means)."""
    k = len(study.seeds)
    stats = {r: mean_sd(e) for r, e in study.errors.items()}
    listing = "; ".join(
        f"trained with {r}: mean {m:.2f}% (from {min(study.errors[r]):.2f} to {max(study.errors[r]):.2f}, standard deviation {sd:.2f})"
        for r, (m, sd) in stats.items()
    )
    said = [f"Over {k} training seeds ({study.architecture}; each model on {study.n_test:,} test images): {listing}."]
    routings = list(stats)
    apart, within = [], []
    for i, a in enumerate(routings):
        for b in routings[i + 1 :]:
            (ma, sa), (mb, sb) = stats[a], stats[b]
            band = 2 * math.sqrt(sa**2 / k + sb**2 / k)
            low, high = (a, b) if ma <= mb else (b, a)
            text = f"{low} against {high}: {abs(ma - mb):.2f} points lower, "
            if abs(ma - mb) > band:
                apart.append(text + f"beyond the ±{band:.2f} the seeds give")
            else:
                within.append(text + f"within the ±{band:.2f} the seeds give")
    verdict = (
        "so on this schedule, which routing a model was trained with made no difference beyond what the training seed makes."
        if not apart
        else "so on this schedule, the routing a model was trained with made a difference beyond the seeds' spread where it says so."
    )
    said.append("Between the means: " + "; ".join(apart + within) + f"; {verdict}")
    gap = 2 * math.sqrt(2) * max(sd for _, sd in stats.values())
    said.append(
        f"Two single training runs that differ only in their seed land up to about {gap:.2f} points apart here (two standard "
        "deviations of the difference of two runs), so one run per routing cannot tell routings apart by less than that at this schedule."
    )
    return said


EFFICIENT_MNIST = ("efficient", "mnist", None, True)  # the published result the lab quotes beside Sabour et al.'s
PUBLISHED = (
    "Paik, Lee and Kim (2019, arXiv 1907.13327): on their benchmarks dynamic and EM routing were not better than "
    "uniform or random couplings, and routing mainly made the couplings more extreme.",
    "Gu and Tresp (2020, CVPR): routing contributed neither to generalisation nor to affine robustness; their "
    "capsule networks without routing reached 93.21% on affNIST after MNIST training, against 79% for CapsNet.",
    f"Mazzia, Salvetti and Chiaberge (2021, Efficient-CapsNet): {PAPER[EFFICIENT_MNIST]}% MNIST test error with one pass of self-attention "
    "routing and about 161 thousand parameters, after 150 epochs with augmentation.",
)


def stored_rows(
    entries, routings, settings: Settings = Settings(), folders: list[Path] | None = None, skipped: list[str] | None = None
) -> dict[tuple[str, str], Row]:
    """The rows already stored for (model file, routing) among `entries` ((path, meta) pairs). A
    stored file that is not a row (damaged, or by another version of the lab) is measured again,
    the model and routing added to `skipped` (for the page's note)."""
    rows = {}
    for path, meta in entries:
        for routing in routings:
            value = stored.read(key(path, routing, meta.image_dataset, settings), folders)
            if value is None:
                continue
            try:
                rows[path.stem, routing] = Row.from_stored(
                    value, path.stem, trained_with(meta.config), routing, architecture(meta), trained_label(meta.config)
                )
            except (TypeError, ValueError):
                if skipped is not None:
                    skipped.append(f"{path.stem} run with {routing}")
    return rows


def run_lab(
    entries,
    routings,
    load: Callable[[Path], object],
    data_for: Callable[[object], object],
    settings: Settings = Settings(),
    on_progress: Callable[[int, int, str], None] | None = None,
    folders: list[Path] | None = None,
    into: Path | None = None,
) -> list[Row]:
    """Every (model, routing) row for `entries` ((checkpoint path, meta) of vector-capsule models):
    the stored one where there is one, else measured (the model loaded by `load(path)`, the test
    images by `data_for(meta)`: the test set of the model's own dataset) and stored."""
    have = stored_rows(entries, routings, settings, folders)
    todo = [(p, m, r) for p, m in entries for r in routings if (p.stem, r) not in have]
    for k, (path, meta, routing) in enumerate(todo):
        tell = (lambda what, k=k, name=path.stem, r=routing: on_progress(k, len(todo), f"{name} with {r}: {what}")) if on_progress else None
        t = time.perf_counter()
        row = measure(load(path), path.stem, routing, data_for(meta), settings, tell, architecture(meta))
        print(f"capsviz lab: {path.stem} with {routing} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        stored.write(key(path, routing, meta.image_dataset, settings), row.stored(), into)
        have[path.stem, routing] = row
    return [have[p.stem, r] for p, _ in entries for r in routings]


def precompute(folder: Path, out: Path, data_dir=None) -> list[Row]:
    """The lab's default rows for every vector-capsule model in `folder`, stored in `out`."""
    from capsviz.checkpoint import list_checkpoints, load_checkpoint
    from capsviz.data import model_test_set

    entries = [(p, meta) for p, meta in list_checkpoints(folder) if not isinstance(meta, str) and fits(meta.config)]
    load = lambda p: load_checkpoint(p)[0]  # noqa: E731
    data = lambda meta: model_test_set(meta.image_dataset, meta.config.in_size, meta.config.in_channels, data_dir)  # noqa: E731
    return run_lab(entries, vector_routings(), load, data, folders=[out], into=out)


# The table's columns with the decimals they are shown with (the sentences quote them so); short
# headers, so that every column fits a laptop's width (TABLE_WORDS defines each)
DECIMALS = {
    "error %": 2,
    "± chance": 2,
    "shifted acc. %": 1,
    "FGSM acc. %": 1,
    "entropy %": 1,
    "c to pred.": 2,
    "ms / image": 2,
}
# The page shows the table as two, so that each fits a laptop's width: what the routings score, and
# what they do to the couplings and cost in time (each row keeps its model and routing)
SPLIT = (
    ("model", "trained with", "run with", "error %", "± chance", "shifted acc. %", "FGSM acc. %", "pair acc. %"),
    ("model", "run with", "entropy %", "c to pred.", "ms / image", "ms range"),
)
ENTROPY_TITLE = "Entropy, % (100 = uniform)"  # of the uniform split's; random couplings route nothing either, yet sit lower


def table_words(rows: list[Row]) -> str:
    """What each of the table's columns counts, said under it."""
    pairs = max((r.n_pairs for r in rows), default=0)
    first = rows[0]
    said = (
        f"error: the share of the first {first.n_test:,} test images whose longest capsule is not their label"
        + (
            " (a MultiMNIST model reads one MNIST digit alone in its 36x36 frame here: its digit error, not the pair error its zoo card quotes)"
            if pairs
            else ""
        )
        + f"; ± chance: two standard errors of that error, what the test images alone can move it; shifted: accuracy on {first.n_images:,} "
        f"test images each moved up to {SHIFT_PX} px and turned up to {ROTATE_DEG}° (the same draw for every model); FGSM: accuracy under "
        f"the FGSM attack on {first.n_images:,} images; "
    )
    if pairs:
        said += (
            f"pair acc.: the share of {pairs:,} MultiMNIST test pairs whose two digits are both among the two longest capsules "
            "(100 minus it is the pair error), '-' for a model that does not read 36x36 pairs; "
        )
    return said + (
        f"entropy: the couplings' mean entropy as a % of the uniform split's, over {COUPLING_IMAGES} images (100% = uniform couplings); "
        f"c to pred.: a primary capsule's mean coupling to the predicted class (uniform: {1 / first.classes:.2f} with {first.classes} classes)."
    )


def table(rows: list[Row]) -> list[dict]:
    """The rows as the page's table shows them (and the markdown table below): numbers rounded to
    `DECIMALS`, "-" where a measure does not apply (pair accuracy: its own decimals, as text)."""
    return [
        {
            "model": r.model,
            "trained with": r.trained,
            "run with": r.run_with,
            "error %": round(r.test_error, 2),
            "± chance": round(spread(r.test_error, r.n_test), 2),
            "shifted acc. %": round(r.shifted_accuracy, 1),
            "FGSM acc. %": round(r.fgsm_accuracy, 1),
            "pair acc. %": "-" if r.pair_accuracy is None else f"{r.pair_accuracy:.2f}",
            "entropy %": round(100 * r.entropy_ratio, 1),
            "c to pred.": round(r.coupling_to_prediction, 2),
            "ms / image": round(r.timing.median, 2),
            "ms range": _range(r.timing),
        }
        for r in rows
    ]


def _range(t: rules.Timing) -> str:
    lo, hi = t.range
    return "one timing" if len(t.samples) == 1 else f"{lo:.2f}-{hi:.2f} ({len(t.samples)} timings)"


def markdown(rows: list[Row], studies: list[SeedStudy] = ()) -> str:
    """The rows as a markdown table, then the sentences the page prints (the short answer, each
    model's details, what compares models), then the seed studies'."""
    cells = table(rows)
    head = list(cells[0]) if cells else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    shown = lambda k, v: f"`{v}`" if k == "model" else f"{v:.{DECIMALS[k]}f}" if k in DECIMALS else str(v)  # noqa: E731
    lines += ["| " + " | ".join(shown(k, v) for k, v in c.items()) + " |" for c in cells]
    rep = report(rows, studies)
    out = lines + ["", "In short:", ""] + [f"- {line}" for line in rep.short + rep.hidden]
    for name, said in rep.models.items():
        out += ["", f"`{name}`:", ""] + [f"- {line}" for line in said]
    out += ["", "Across models:", ""] + [f"- {line}" for line in rep.across + [line for st in studies for line in seed_sentences(st)]]
    return "\n".join(out)


if __name__ == "__main__":
    from capsviz.checkpoint import list_checkpoints, load_checkpoint
    from capsviz.data import load_split
    from capsviz.paths import shipped_checkpoints

    target = stored.shipped_folder()
    if "--retime" in sys.argv:  # the time per image of every stored row again, on a quiet machine
        for path, meta in list_checkpoints(shipped_checkpoints()):
            if isinstance(meta, str) or not fits(meta.config):
                continue
            model = load_checkpoint(path)[0]
            x, _ = attack_test_images(load_split(meta.image_dataset, "test"), TIME_BATCH, meta.config.in_size)
            where = {r: key(path, r, meta.image_dataset, Settings()) for r in vector_routings()}
            values = {r: v for r, w in where.items() if (v := stored.read(w, [target])) is not None}
            runs = {r: RunWith(model, r, ITERATIONS if ROUTINGS[r].iterative else None) for r in values}
            timed, load, cores = retime(runs, x), os.getloadavg()[0], os.cpu_count() or 0
            if rules.busy(load, cores):  # a busy machine's times would replace better ones and claim nothing
                print(f"{path.stem}: the machine is busy (load {load:.1f} on {cores} cores), so its times are not stored", file=sys.stderr)
                continue
            for r, value in values.items():
                value.update(
                    ms_per_image=statistics.median(timed[r]), ms_samples=list(timed[r]), hardware=_hardware(), load=load, cores=cores
                )
                stored.write(where[r], value, target)
                print(f"{path.stem} with {r}: {rules.Timing(timed[r]).words()}, load {load:.2f}", file=sys.stderr)
    elif "--seeds" in sys.argv:  # a seed study made of finished training runs (RESULTS.md has the commands)
        from capsviz.checkpoint import read_meta

        files = [Path(a) for a in sys.argv[sys.argv.index("--seeds") + 1 :]]
        try:
            study = seed_study(read_meta(f) for f in files)
        except (OSError, ValueError) as e:
            sys.exit(f"error: {e}")
        stored.write(seeds_key(study), study.stored(), target)
        print("\n".join(f"- {line}" for line in seed_sentences(study)))
    elif "--table" in sys.argv:  # what is stored, as the page shows it: nothing is measured
        entries = [(p, m) for p, m in list_checkpoints(shipped_checkpoints()) if not isinstance(m, str) and fits(m.config)]
        have = stored_rows(entries, vector_routings(), folders=[target])
        print(markdown([have[p.stem, r] for p, _ in entries for r in vector_routings() if (p.stem, r) in have], stored_studies([target])))
    else:
        print(f"{len(precompute(shipped_checkpoints(), target))} lab results in {target}")
