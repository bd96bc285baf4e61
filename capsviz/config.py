"""Datasets, the named model presets the CLI and app offer, and a training run as data.

Each family's config dataclass lives in its folder (capsviz/families/NAME/config.py) and is
reached through capsviz.registry; this module names none of them. A config is data: `to_dict` goes into every checkpoint and `config_from_dict` rebuilds it. A
training run (`TrainRun`) is data too: the `capsviz train` flags are made from its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar, Protocol

from capsviz.bounds import MAX_ITERATIONS, MAX_SIZE, MIN_SIZE
from capsviz.errors import CapsvizError
from capsviz.i18n import N_, t
from capsviz.registry import FAMILIES, vector_routings


@dataclass(frozen=True)
class Dataset:
    """A training dataset: everything else (the CLI's choices, the schema, the Train page, input
    sizes, the learning-rate schedule) is derived from `DATASETS`."""

    name: str
    source: str  # the image files it is drawn from (capsviz.data.sources.SOURCES)
    in_size: int  # the model's input: MultiMNIST pads to 36 for its shifts, affNIST to 40
    labels: int = 1  # digits per image: MultiMNIST overlays two
    # steps per x0.96 learning-rate decay: the paper decays 10x more slowly on MultiMNIST, whose epochs are fresh pairs
    decay_steps: int = 2000


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset("mnist", "mnist", 28),
        Dataset("fashion-mnist", "fashion-mnist", 28),
        Dataset("multimnist", "mnist", 36, labels=2, decay_steps=20000),
        Dataset("affnist", "mnist", 40),
    )
}
DATASET_NAMES = tuple(DATASETS)


@dataclass(frozen=True)
class UserKind:
    """A kind of dataset a user brings: `--dataset KIND:PATH` (capsviz.data.user reads each kind).
    Its images keep their own size (or `--resize N`), channels and classes."""

    name: str
    what: str  # what PATH must be, as the CLI's help and errors say it (a catalog message: t(kind.what) where shown)


USER_KINDS: dict[str, UserKind] = {
    k.name: k
    for k in (
        UserKind("folder", N_("a folder with one subfolder of images (PNG, JPEG, BMP) per class, or train/ and test/ folders of them")),
        UserKind(
            "npz", N_("a .npz file with arrays images (N, H, W[, C]) and labels (N,), optional class_names, test_images, test_labels")
        ),
        UserKind("cifar10", N_("the folder of binary CIFAR-10 (data_batch_1.bin ... test_batch.bin, batches.meta.txt)")),
    )
}


def what_path(kind: str) -> str:
    """What PATH must be for a user's dataset of `kind` (KIND:PATH), in the reader's language."""
    return t(USER_KINDS[kind].what)


def user_dataset(spec: str) -> tuple[str, str] | None:
    """("folder", "/path") for a user's dataset "folder:/path"; None for a built-in name."""
    kind, sep, path = spec.partition(":")
    return (kind, path) if sep and kind in USER_KINDS else None


def check_dataset(spec: str) -> str:
    """A built-in dataset's name or KIND:PATH; anything else is refused with the choices."""
    if spec in DATASETS:
        return spec
    user = user_dataset(spec)
    if user is None or not user[1]:
        kinds = "; ".join(f"{k}:PATH ({what_path(k)})" for k in USER_KINDS)
        raise CapsvizError(
            t(
                "unknown dataset {dataset}; choose from {choices}, or your own: {kinds}",
                dataset=repr(spec),
                choices=", ".join(DATASETS),
                kinds=kinds,
            )
        )
    return spec


class ModelConfig(Protocol):
    """What every family's config (capsviz/families/NAME/config.py) has: a frozen dataclass whose
    `family` field names its registry entry, with its routing's name, the TrainRun fields that
    override it and whether its model redraws its input."""

    family: str
    in_size: int
    in_channels: int
    num_classes: int
    routing: ClassVar[str | None]
    run_options: ClassVar[tuple[str, ...]]


class _Presets(Mapping):
    """Every family's named configs, in the registry's order (the CLI's `--model` choices, the
    Train page's list), read from the registry at each use, so a family registered later (a
    test's) offers its presets too."""

    def _table(self) -> dict[str, ModelConfig]:
        return {name: c for f in FAMILIES.values() for name, c in f.preset_table.items()}

    def __getitem__(self, name: str) -> ModelConfig:
        return self._table()[name]

    def __iter__(self):
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


PRESETS: Mapping[str, ModelConfig] = _Presets()


def to_dict(config: ModelConfig) -> dict:
    d = asdict(config)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def config_from_dict(d: dict) -> ModelConfig:
    """Rebuild a config from checkpoint metadata, refusing unknown families or fields."""
    if not isinstance(d, dict) or d.get("family") not in FAMILIES:
        raise CapsvizError(t("unknown model family {family}", family=repr(d.get("family") if isinstance(d, dict) else d)))
    cls = FAMILIES[d["family"]].config_class
    names = {f.name for f in fields(cls)}
    unknown = set(d) - names
    if unknown:
        raise CapsvizError(t("unknown {family} config fields: {fields}", family=d["family"], fields=sorted(unknown)))
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
    try:
        return cls(**kw)
    except TypeError as e:
        raise CapsvizError(t("bad {family} config: {why}", family=d["family"], why=e)) from None


def preset(name: str, **overrides) -> ModelConfig:
    if name not in PRESETS:
        raise CapsvizError(t("unknown model preset {name}; choose from {choices}", name=repr(name), choices=", ".join(PRESETS)))
    d = to_dict(PRESETS[name])
    d.update({k: v for k, v in overrides.items() if v is not None})
    return config_from_dict(d)


def option(default, help: str, *, lo=None, hi=None, lo_open: bool = False, choices=None, unset: str = "", flag: str = "", parse=None):
    """A TrainRun field with what `capsviz train` says of it and accepts (capsviz.cli.train): `help` (a
    catalog message, translated where shown, its {datasets} and {kinds} filled in), the bounds [lo, hi] ((lo, hi] with `lo_open`), `choices` (or a function giving them, read when
    the flags are made, as the registered presets and routings are) or a `parse` function that raises
    CapsvizError, what None means (`unset`), and a flag name other than the field's (`flag`)."""
    return field(
        default=default,
        metadata={"help": help, "lo": lo, "hi": hi, "lo_open": lo_open, "choices": choices, "unset": unset, "flag": flag, "parse": parse},
    )


@dataclass(frozen=True)
class TrainRun:
    """Everything that defines a run; saved in the checkpoint so a resume can check it. Every field
    is a flag of `capsviz train`, with the help and bounds given here."""

    model: str = option("capsnet-small", N_("model preset"), choices=lambda: tuple(PRESETS))
    dataset: str = option(
        "mnist",
        N_("training dataset: {datasets}, or your own images as {kinds} (docs/own-images.md)"),
        parse=check_dataset,
    )
    epochs: int = option(10, N_("passes over the training set"), lo=1, hi=100_000)
    batch_size: int = option(128, N_("images per step (per process under torchrun)"), lo=1, hi=1 << 16)
    routing_iterations: int | None = option(None, N_("routing iterations"), lo=1, hi=MAX_ITERATIONS, unset=N_("the preset's"))
    reconstruction: bool | None = option(
        None, N_("CapsNet: train without the decoder and its reconstruction loss"), unset=N_("the preset's"), flag="--no-reconstruction"
    )
    couplings: str | None = option(
        None,
        N_(
            "CapsNet: how DigitCaps' couplings are made (uniform, random: baselines without routing; "
            "self-attention: Efficient-CapsNet's, without its learned prior)"
        ),
        choices=vector_routings,  # every vector-capsule routing in capsviz.registry.ROUTINGS
        unset="dynamic",
    )
    final_lambda: float | None = option(
        None, N_("matrix capsules: EM inverse temperature at the last iteration"), lo=0, hi=100, lo_open=True, unset=N_("the preset's, 0.3")
    )
    lr: float = option(1e-3, N_("Adam's learning rate (TensorFlow's defaults otherwise)"), lo=0, hi=10, lo_open=True)
    lr_decay: float = option(0.96, N_("multiply the learning rate by this every --decay-steps steps"), lo=1e-6, hi=1)
    # default_decay_steps(dataset) is what the CLI and the Train page pass
    decay_steps: int = option(2000, N_("steps per learning-rate decay"), lo=1, unset=N_("the dataset's: 2000; 20000 for multimnist"))
    seed: int = option(0, N_("seed of the initial weights, the data order and the augmentation"), lo=0, hi=2**63 - 1)
    device: str = option("auto", N_("auto, cpu, cuda, cuda:N or mps"))
    precision: str = option("fp32", N_("arithmetic of the forward pass (autocast)"), choices=("fp32", "bf16", "fp16"))
    compile: bool = option(
        False, N_("torch.compile the model (matrix capsules: the PyTorch EM core, used on a GPU or without the native kernel)")
    )
    data_dir: str | None = option(None, N_("folder holding the dataset files"), unset=N_("the usual places, as `capsviz data` lists them"))
    resize: int | None = option(
        None, N_("make every image N x N pixels (your own images)"), lo=MIN_SIZE, hi=MAX_SIZE, unset=N_("their own size")
    )
    train_limit: int | None = option(None, N_("use only this many training images (quick runs, tests)"), lo=1, unset=N_("all"))
    test_limit: int | None = option(None, N_("evaluate on only this many test images"), lo=1, unset=N_("all"))
    init_from: str | None = option(
        None, N_("start from this checkpoint's weights (fine-tuning: fresh optimiser and schedule)"), unset=N_("fresh weights")
    )
    margin_start: float = option(
        0.2, N_("matrix capsules: spread-loss margin at the start, rising to 0.9 (0.9: fixed, for fine-tuning)"), lo=0, hi=0.9
    )
