"""What a checkpoint's metadata and a run's training state may hold: one table of types and
bounds, checked when a file is read and before anything is built from it.

A file comes from anywhere (a download, a shared folder, an edit by hand), so every value a
page, the CLI or a model constructor will use is checked here, once, and a failure names the
field, what was expected and what was found. `CheckpointMeta.from_dict` checks a file's metadata
and builds the typed record every reader uses; its `raw` dict is what the file holds, unchanged.
"""

from __future__ import annotations

import dataclasses
import math
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from capsviz.config import (
    DATASET_NAMES,
    MAX_ITERATIONS,
    MAX_SIZE,
    MIN_SIZE,
    PRESETS,
    USER_KINDS,
    ModelConfig,
    check_dataset,
    config_from_dict,
)
from capsviz.errors import CapsvizError, first_line
from capsviz.i18n import recalled, t
from capsviz.registry import FAMILIES, vector_routings

MAX_META_BYTES = 1_000_000  # the longest shipped metadata (MultiMNIST, 100 epochs of history) is 126 kB
MAX_DEPTH = 48  # nesting of JSON containers: a fine-tuning chain of 10 runs needs about 30
MAX_STRING = 4096  # paths are the longest strings a run records
MAX_LIST = 100_000
MAX_KEY = 200  # characters of a key: field names are short
MAX_PARAMETERS = 200_000_000  # the largest preset has 35.4M; this bounds what building a model may allocate
MAX_CHAIN = 16  # fine-tuning runs recorded in `started_from`


class Invalid(Exception):
    """One bad value: `where` is its dotted path in the file; `message`, in the reader's language,
    what is wrong with it."""

    def __init__(self, where: str, message: str):
        if len(where) > 80:  # a path into deep nesting: its two ends say where
            where = f"{where[:30]}...{where[-40:]}"
        super().__init__(f"{where or t('metadata')}: {message}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class Num:
    lo: float
    hi: float
    integer: bool = False

    def check(self, v, where: str) -> None:
        ok_type = isinstance(v, int) if self.integer else isinstance(v, int | float)
        said = dict(lo=f"{self.lo:g}", hi=f"{self.hi:g}", found=_show(v))
        if isinstance(v, bool) or not ok_type:
            raise Invalid(
                where, t("must be an integer, found {found}", **said) if self.integer else t("must be a number, found {found}", **said)
            )
        if not math.isfinite(v) or not self.lo <= v <= self.hi:
            raise Invalid(
                where,
                t("must be an integer in [{lo}, {hi}], found {found}", **said)
                if self.integer
                else t("must be a number in [{lo}, {hi}], found {found}", **said),
            )


def Int(lo: float, hi: float) -> Num:
    return Num(lo, hi, integer=True)


@dataclass(frozen=True)
class Str:
    max_len: int = MAX_STRING
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None  # a function: read at each check

    def check(self, v, where: str) -> None:
        choices = self.choices() if callable(self.choices) else self.choices
        if choices is not None and (not isinstance(v, str) or v not in choices):
            raise Invalid(where, t("must be one of {choices}; found {found}", choices=", ".join(choices), found=_show(v)))
        if not isinstance(v, str):
            raise Invalid(where, t("must be a string, found {found}", found=_show(v)))
        if len(v) > self.max_len:
            raise Invalid(where, t("string of {n} characters; at most {most}", n=len(v), most=self.max_len))


class DatasetSpec:
    """A built-in dataset's name, or a user's KIND:PATH (capsviz.config.USER_KINDS)."""

    def check(self, v, where: str) -> None:
        try:
            ok = isinstance(v, str) and len(v) <= MAX_STRING and check_dataset(v) == v
        except CapsvizError:
            ok = False
        if not ok:
            raise Invalid(
                where,
                t(
                    "must be one of {datasets}, or KIND:PATH with KIND one of {kinds}; found {found}",
                    datasets=", ".join(DATASET_NAMES),
                    kinds=", ".join(USER_KINDS),
                    found=_show(v),
                ),
            )


class Bool:
    def check(self, v, where: str) -> None:
        if not isinstance(v, bool):
            raise Invalid(where, t("must be true or false, found {found}", found=_show(v)))


@dataclass(frozen=True)
class Maybe:
    inner: Any

    def check(self, v, where: str) -> None:
        if v is not None:
            self.inner.check(v, where)


@dataclass(frozen=True)
class List:
    item: Any
    max_len: int = MAX_LIST
    min_len: int = 0

    def check(self, v, where: str) -> None:
        if not isinstance(v, list):
            raise Invalid(where, t("must be a list, found {found}", found=_show(v)))
        if not self.min_len <= len(v) <= self.max_len:
            raise Invalid(where, t("must hold {lo}-{hi} items, found {n}", lo=self.min_len, hi=self.max_len, n=len(v)))
        for i, x in enumerate(v):
            self.item.check(x, f"{where}[{i}]")


@dataclass(frozen=True)
class Obj:
    """A JSON object with known fields; `extra` says whether other keys are allowed (they are
    still bounded by `check_json_bounds`)."""

    fields: dict
    required: tuple[str, ...] = ()
    extra: bool = True

    def check(self, v, where: str) -> None:
        if not isinstance(v, dict):
            raise Invalid(where, t("must be an object, found {found}", found=_show(v)))
        for k in self.required:
            if k not in v:
                raise Invalid(where, t("missing field {name}", name=repr(k)))
        for k, x in v.items():
            if k in self.fields:
                self.fields[k].check(x, f"{where}.{k}" if where else k)
            elif not self.extra:
                raise Invalid(where, t("unknown field {name}", name=_show(k)))


@dataclass(frozen=True)
class StoredWords:
    """Words a file keeps to be said in each reader's language (capsviz.i18n.stored): plain text,
    or a message with its named values (strings, numbers, such words again, or lists of them),
    each placeholder of the message one of its values by name."""

    max_len: int = MAX_STRING

    def check(self, v, where: str) -> None:
        if isinstance(v, str):
            Str(self.max_len).check(v, where)
            return
        record = Obj(
            {"message": Str(self.max_len), "values": Obj({}), "plural": Str(self.max_len), "n": Int(0, 1e12)},
            required=("message",),
            extra=False,
        )
        record.check(v, where)
        for name, value in v.get("values", {}).items():
            self._value(value, f"{where}.values.{name}")
        if ("plural" in v) != ("n" in v):
            raise Invalid(where, t("a plural message needs both plural and n"))
        for message in (v["message"], v.get("plural", "")):
            for _, name, spec, conversion in string.Formatter().parse(message):
                if name is not None and not (name.isidentifier() and not conversion and "{" not in (spec or "")):
                    raise Invalid(where, t("placeholder {name} is not one of its values by name", name=_show(name)))
        try:
            recalled(v)  # made in English here: every placeholder has its value, of a type its format takes
        except KeyError as e:
            raise Invalid(where, t("placeholder {name} has no value", name=_show(e.args[0]))) from None
        except (IndexError, ValueError, TypeError) as e:
            raise Invalid(where, t("words that cannot be said: {why}", why=first_line(e)[:200])) from None

    def _value(self, v, where: str) -> None:
        if isinstance(v, list):
            for i, x in enumerate(v):
                self._value(x, f"{where}[{i}]")
        elif isinstance(v, dict | str):
            self.check(v, where)
        elif isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise Invalid(where, t("must be words or a number, found {found}", found=_show(v)))


class Lazy:
    """A schema defined after its first use (`started_from` holds a record of the same kind)."""

    def __init__(self, get):
        self.get = get

    def check(self, v, where: str) -> None:
        self.get().check(v, where)


def config_fields(cls: type) -> Obj:
    """A family's config fields and bounds, as files are checked: derived from its dataclass, whose
    fields declare their bounds (capsviz.bounds.bounded); a bool or a free string needs none. A
    number without bounds is refused here, naming the field, so no family is checked loosely."""
    table = {}
    for f in dataclasses.fields(cls):
        lo, hi, choices = (f.metadata.get(k) for k in ("lo", "hi", "choices"))
        default = f.default
        if isinstance(default, bool):
            table[f.name] = Bool()
        elif isinstance(default, str):
            table[f.name] = Str(choices=choices)
        elif lo is None or hi is None:
            raise TypeError(f"{cls.__name__}.{f.name}: a number needs its bounds (capsviz.bounds.bounded(default, lo=..., hi=...))")
        elif isinstance(default, tuple):
            item = Int(lo, hi) if all(isinstance(x, int) for x in default) else Num(lo, hi)
            table[f.name] = List(item, max_len=len(default), min_len=len(default))
        else:
            table[f.name] = Int(lo, hi) if isinstance(default, int) else Num(lo, hi)
    return Obj(table, extra=False)


class Config:
    """A model config: its family's fields and bounds (`config_fields` of the config class its
    capsviz.registry.FAMILIES entry names), then the model it describes must build (on PyTorch's meta device: no memory) with at
    most MAX_PARAMETERS parameters."""

    def check(self, v, where: str) -> None:
        if not isinstance(v, dict):
            raise Invalid(where, t("must be an object, found {found}", found=_show(v)))
        family = v.get("family")
        if family not in FAMILIES:  # the registered families (capsviz.registry), each with its config's fields
            raise Invalid(f"{where}.family", t("must be one of {choices}; found {found}", choices=", ".join(FAMILIES), found=_show(family)))
        config_fields(FAMILIES[family].config_class).check(v, where)
        from capsviz.models import build_model, count_parameters

        try:
            cfg = config_from_dict(v)
        except CapsvizError as e:
            raise Invalid(where, str(e)) from None
        problem = getattr(cfg, "problem", None)  # what a config can say of itself before anything is built
        if problem:
            raise Invalid(where, problem)
        try:
            with torch.device("meta"):
                n = count_parameters(build_model(cfg))
        except Exception as e:  # noqa: BLE001 - whatever stops a model building, the file cannot be used
            raise Invalid(where, t("describes a model that cannot be built ({why})", why=f"{type(e).__name__}: {first_line(e)}")) from None
        if n > MAX_PARAMETERS:
            raise Invalid(where, t("describes a model of {n} parameters; at most {most}", n=f"{n:,}", most=f"{MAX_PARAMETERS:,}"))


FINITE = Num(-1e300, 1e300)
PERCENT = Num(0, 100)
SECONDS = Num(0, 1e10)
EPOCHS = Num(0, 1e6)
SHA256 = Str(max_len=64)

METRICS = Obj({"test_error": PERCENT, "test_accuracy": PERCENT, "n_test": Int(0, 10**8), "how": Str(max_len=1000)})

# TrainRun (capsviz.config): every field, since a resume rebuilds the run from it
RUN = Obj(
    {
        "model": Str(choices=lambda: tuple(PRESETS)),
        "dataset": DatasetSpec(),
        "epochs": Int(1, 100_000),
        "batch_size": Int(1, 1 << 16),
        "routing_iterations": Maybe(Int(1, MAX_ITERATIONS)),
        "reconstruction": Maybe(Bool()),
        "couplings": Maybe(Str(choices=vector_routings)),
        "final_lambda": Maybe(Num(1e-6, 100)),
        "lr": Num(1e-12, 10),
        "lr_decay": Num(1e-6, 1),
        "decay_steps": Int(1, 10**12),
        "seed": Int(0, 2**63 - 1),
        "device": Str(max_len=64),
        "precision": Str(choices=("fp32", "bf16", "fp16")),
        "compile": Bool(),
        "data_dir": Maybe(Str()),
        "resize": Maybe(Int(MIN_SIZE, MAX_SIZE)),
        "train_limit": Maybe(Int(1, 10**9)),
        "test_limit": Maybe(Int(1, 10**9)),
        "init_from": Maybe(Str()),
        "margin_start": Num(0, 0.9),
    },
    extra=False,
)

HISTORY = List(
    Obj({"epoch": EPOCHS, "train_loss": FINITE, "train_accuracy": PERCENT, "images_per_s": Num(0, 1e12), "metrics": METRICS}),
)

# What `checkpoint.lineage` records about the run a fine-tuned one started from
STARTED_FROM = Obj(
    {
        "file": Str(max_len=255),
        "weights_sha256": SHA256,
        "run": RUN,
        "epochs": EPOCHS,
        "training_time_s": SECONDS,
        "hardware": Str(max_len=500),
        "metrics": METRICS,
        "history": HISTORY,
        "started_from": Lazy(lambda: STARTED_FROM),
    }
)

# What `capsviz import` records of a network written elsewhere: its file, what was assumed, and
# whether its twin was checked against the network's own code (`checked`: None or absent: not checked)
IMPORTED = Obj(
    {
        "file": Str(max_len=255),
        "sha256": SHA256,
        "notes": List(StoredWords(max_len=2000), max_len=200),  # capsviz.i18n.stored: said in the reader's language
        "warnings": List(StoredWords(max_len=2000), max_len=50),
        "checked": Maybe(
            Obj(
                {
                    "against": Str(max_len=500),
                    "max_difference": Num(0, 1e300),
                    "images": Int(1, 10**6),
                    "stages": List(Str(max_len=200)),
                    "input": Str(max_len=500),  # the images the check fed, in words (imports of an earlier capsviz)
                    # the images the check fed, (x - mean) / std of [0, 1] pixels, and who said so: the user's
                    # input pipeline (`pipeline`, MODULE:NAME), their --normalise, or the network's lengths
                    "fed": Obj(
                        {
                            "mean": Num(-1e6, 1e6),
                            "std": Num(1e-12, 1e6),
                            "by": Str(choices=("pipeline", "normalise", "lengths")),
                            "pipeline": Str(max_len=500),
                        },
                        required=("mean", "std", "by"),
                    ),
                },
                required=("against", "max_difference", "images"),
            )
        ),
    }
)

META = Obj(
    {
        "config": Config(),
        "dataset": DatasetSpec(),
        # what a model trained on a user's images says of them: class names in capsule order, image shape
        "classes": List(Str(max_len=200), max_len=100),
        "image": Obj({"size": Int(MIN_SIZE, MAX_SIZE), "channels": Int(1, 3)}, required=("size", "channels"), extra=False),
        "parameters": Int(0, MAX_PARAMETERS),
        "capsviz_version": Str(max_len=64),
        "weights_sha256": SHA256,
        "run": RUN,
        "hardware": Str(max_len=500),
        "effective_batch_size": Int(1, 1 << 24),
        "started_from": STARTED_FROM,
        "epochs": EPOCHS,
        "metrics": METRICS,
        "history": HISTORY,
        "training_time_s": SECONDS,
        "complete": Bool(),
        "float32_test_error": PERCENT,
        "stored_as": Str(choices=("float16",)),
        "float16_reconstruction_change": Maybe(Num(0, 1e6)),
        "imported": IMPORTED,
    },
    required=("config", "weights_sha256"),
)


def check_json_bounds(value, max_depth: int = MAX_DEPTH) -> None:
    """Every container at most `max_depth` deep, every string at most MAX_STRING long, every
    list at most MAX_LIST long, whatever the key: bounds that hold for fields no schema names.
    Iterative, so a deep file cannot exhaust Python's recursion limit here."""
    todo = [(value, 1, "")]
    while todo:
        v, depth, where = todo.pop()
        if isinstance(v, dict | list):
            if depth > max_depth:
                raise Invalid(where, t("nested more than {n} levels deep", n=max_depth))
            if len(v) > MAX_LIST:
                raise Invalid(where, t("holds {n} entries; at most {most}", n=len(v), most=MAX_LIST))
            items = v.items() if isinstance(v, dict) else enumerate(v)
            for k, x in items:
                if isinstance(k, str) and len(k) > MAX_KEY:
                    raise Invalid(where, t("key of {n} characters; at most {most}", n=len(k), most=MAX_KEY))
                todo.append((x, depth + 1, (f"{where}.{k}" if where else str(k)) if isinstance(v, dict) else f"{where}[{k}]"))
        elif isinstance(v, str) and len(v) > MAX_STRING:
            raise Invalid(where, t("string of {n} characters; at most {most}", n=len(v), most=MAX_STRING))


def check_meta(meta) -> None:
    """Raise Invalid naming the first field of checkpoint metadata that is wrong."""
    check_json_bounds(meta)
    META.check(meta, "")
    chain, m = 0, meta
    while isinstance(m, dict) and "started_from" in m:
        chain, m = chain + 1, m["started_from"]
        if chain > MAX_CHAIN:
            raise Invalid("started_from", t("a chain of more than {n} fine-tuning runs", n=MAX_CHAIN))


@dataclass(frozen=True)
class Metrics:
    """A test measurement (`capsviz.train.evaluate`): error and accuracy in %, on how many images, how."""

    test_error: float | None = None
    test_accuracy: float | None = None
    n_test: int | None = None
    how: str = ""

    @classmethod
    def from_dict(cls, d: dict | None) -> Metrics:
        d = d or {}
        return cls(d.get("test_error"), d.get("test_accuracy"), d.get("n_test"), d.get("how", ""))

    @property
    def measured(self) -> bool:
        return self.test_error is not None

    def to_dict(self) -> dict:
        """The fields recorded, as `evaluate` reports them."""
        return {k: v for k, v in vars(self).items() if v is not None and v != ""}


@dataclass(frozen=True)
class CheckpointMeta:
    """What a checkpoint says about itself, checked (META) and typed. Optional fields are None
    where the file does not record them; `raw` is the metadata as stored, for writing it back."""

    config: ModelConfig
    weights_sha256: str
    dataset: str | None = None
    metrics: Metrics = Metrics()
    parameters: int = 0
    capsviz_version: str | None = None
    run: dict | None = None  # the TrainRun's fields (capsviz.config.TrainRun)
    hardware: str | None = None
    effective_batch_size: int | None = None
    epochs: float | None = None
    history: tuple[dict, ...] = ()  # per epoch: epoch, train_loss, train_accuracy, images_per_s, metrics
    training_time_s: float | None = None
    complete: bool | None = None
    started_from: dict | None = None  # what `checkpoint.lineage` recorded of the run it was fine-tuned from
    float32_test_error: float | None = None
    stored_as: str | None = None
    float16_reconstruction_change: float | None = None
    classes: tuple[str, ...] | None = None  # recorded class names (a user's dataset); see `class_names`
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, meta) -> CheckpointMeta:
        """The metadata of a file, checked: raise Invalid naming the first field that is wrong."""
        check_meta(meta)
        return cls(
            config=config_from_dict(meta["config"]),
            weights_sha256=meta["weights_sha256"],
            dataset=meta.get("dataset"),
            metrics=Metrics.from_dict(meta.get("metrics")),
            parameters=meta.get("parameters", 0),
            capsviz_version=meta.get("capsviz_version"),
            run=meta.get("run"),
            hardware=meta.get("hardware"),
            effective_batch_size=meta.get("effective_batch_size"),
            epochs=meta.get("epochs"),
            history=tuple(meta.get("history") or ()),
            training_time_s=meta.get("training_time_s"),
            complete=meta.get("complete"),
            started_from=meta.get("started_from"),
            float32_test_error=meta.get("float32_test_error"),
            stored_as=meta.get("stored_as"),
            float16_reconstruction_change=meta.get("float16_reconstruction_change"),
            classes=tuple(meta["classes"]) if meta.get("classes") else None,
            raw=meta,
        )

    @property
    def family(self) -> str:
        return self.config.family

    @property
    def class_names(self) -> tuple[str, ...]:
        """What each class capsule stands for: the names recorded with the model, else its dataset's."""
        if self.classes:
            return self.classes
        from capsviz.data import class_names

        return class_names(self.image_dataset)

    @property
    def image_dataset(self) -> str:
        """The dataset whose test images the pages show this model: its own, MNIST where unrecorded."""
        return self.dataset or "mnist"


# The training state `capsviz train` saves beside its weights (`<out>.train.pt`): plain fields,
# then the tensors whose structure `capsviz.train` checks against the model they will drive
STATE_FIELDS = {
    "run": RUN,
    "step": Int(0, 10**12),
    "epoch": Int(0, 100_000),
    "batch": Int(0, 10**9),
    "history": HISTORY,
    "elapsed": SECONDS,
    "weights_sha256": SHA256,
}
STATE_TENSOR_FIELDS = ("optimizer", "scheduler", "torch_rng")


def check_train_state(state) -> None:
    """Raise Invalid for the first thing wrong with a loaded training state: its keys, each
    plain field, the RNG state's size. The optimizer and scheduler are checked against the
    model they will drive, in `capsviz.train`."""
    if not isinstance(state, dict):
        raise Invalid(t("training state"), t("must be a dict, found {found}", found=type(state).__name__))
    known = set(STATE_FIELDS) | set(STATE_TENSOR_FIELDS)
    unknown = sorted(map(str, set(state) - known))
    if unknown:
        raise Invalid(t("training state"), t("unknown key {name}", name=_show(unknown[0])))
    missing = sorted(known - set(state))
    if missing:
        raise Invalid(t("training state"), t("missing {name}", name=repr(missing[0])))
    for k, spec in STATE_FIELDS.items():
        spec.check(state[k], k)
    rng, expected = state["torch_rng"], torch.get_rng_state()
    if not isinstance(rng, torch.Tensor) or rng.dtype != torch.uint8 or rng.shape != expected.shape:
        found = f"{rng.dtype} {tuple(rng.shape)}" if isinstance(rng, torch.Tensor) else type(rng).__name__
        raise Invalid("torch_rng", t("must be a uint8 tensor of shape {shape}, found {found}", shape=tuple(expected.shape), found=found))
    for k in ("optimizer", "scheduler"):
        if not isinstance(state[k], dict):
            raise Invalid(k, t("must be a dict, found {found}", found=type(state[k]).__name__))
