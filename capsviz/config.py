"""Model configurations as frozen dataclasses, and the named presets the CLI and app offer.

A config is data: `to_dict` goes into every checkpoint and `config_from_dict` rebuilds it. A
training run (`TrainRun`) is data too: the `capsviz train` flags are made from its fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar

from capsviz.errors import CapsvizError
from capsviz.registry import FAMILIES, vector_routings

INPUT_SIZES = (28, 32, 36, 40)
MAX_ITERATIONS = 20  # routing iterations accepted anywhere: the pages offer 1-10; each is a full pass over the votes


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
    what: str  # what PATH must be, as the CLI's help and errors say it


USER_KINDS: dict[str, UserKind] = {
    k.name: k
    for k in (
        UserKind("folder", "a folder with one subfolder of images (PNG, JPEG, BMP) per class, or train/ and test/ folders of them"),
        UserKind("npz", "a .npz file with arrays images (N, H, W[, C]) and labels (N,), optional class_names, test_images, test_labels"),
        UserKind("cifar10", "the folder of binary CIFAR-10 (data_batch_1.bin ... test_batch.bin, batches.meta.txt)"),
    )
}
# Sides accepted for a model's input (--resize, a user's images): MNIST's 28 up to ImageNet-sized
# pictures; what memory allows at a given batch is decided by capsviz.estimate, not here.
MIN_SIZE, MAX_SIZE = 8, 512


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
        kinds = "; ".join(f"{k}:PATH ({u.what})" for k, u in USER_KINDS.items())
        raise CapsvizError(f"unknown dataset {spec!r}; choose from {', '.join(DATASETS)}, or your own: {kinds}")
    return spec


@dataclass(frozen=True)
class CapsNetConfig:
    """Dynamic-routing CapsNet (Sabour et al. 2017, Fig. 1). Defaults are the paper's MNIST model."""

    # What the family offers beyond its fields: its routing (capsviz.registry.FAMILIES says which)
    # and the TrainRun fields that override its config (capsviz.train.model_config)
    routing: ClassVar[str | None] = FAMILIES["capsnet"].routing
    run_options: ClassVar[tuple[str, ...]] = ("reconstruction", "couplings")

    family: str = "capsnet"
    in_size: int = 28  # 28 MNIST, 36 MultiMNIST, 40 expanded MNIST / affNIST
    in_channels: int = 1
    num_classes: int = 10
    conv1_channels: int = 256
    conv1_kernel: int = 9
    primary_types: int = 32  # capsule channels in PrimaryCaps
    primary_dim: int = 8
    primary_kernel: int = 9
    digit_dim: int = 16
    routing_iterations: int = 3  # the paper's recommendation (Appendix A)
    # how DigitCaps' couplings are made in training and by default (capsviz.routing.route):
    # the paper's dynamic routing, or a baseline the routing lab compares it with
    couplings: str = "dynamic"
    reconstruction: bool = True  # decoder + 0.0005 * sum-of-squares loss
    decoder_hidden: tuple[int, int] = (512, 1024)
    # How a network written elsewhere computes (capsviz import); the defaults are the paper's, and
    # capsviz's own models never change them. Every non-default runs the plain reference path.
    primary_grouping: str = "paper"  # PRIMARY_GROUPINGS: which conv outputs make one primary capsule
    primary_squash: str = "capsule"  # PRIMARY_SQUASH_AXES: what each squash of the primary capsules normalises
    squash: str = "sabour"  # SQUASH_FORMS: the squash of primary and class capsules
    class_squash: str = "capsule"  # CLASS_SQUASH_AXES: what each squash of the class capsules normalises
    routing_softmax: str = "classes"  # ROUTING_SOFTMAX: what the couplings sum to 1 over
    routing_logits: str = "image"  # ROUTING_LOGITS: per image, or averaged (or summed) over the images routed together
    routing_batch: int = 0  # with batch-averaged logits: images routed together (0: however many are passed)
    routing_prior: bool = False  # a learned routing prior b (I, J), the parameter `routing_prior`
    input_mean: float = 0.0  # the network reads (x - input_mean) / input_std of images x in [0, 1]
    input_std: float = 1.0

    @property
    def decodes(self) -> bool:
        """Whether the model redraws its input from the class capsules (Fig. 2)."""
        return self.reconstruction

    @property
    def paper_computation(self) -> bool:
        """Whether it computes as Sabour et al. (and capsviz's own models) do: every option of a
        network written elsewhere at its default."""
        return all(getattr(self, k) == v for k, v in PAPER_COMPUTATION.items())

    @property
    def primary_grid(self) -> int:
        return (self.in_size - self.conv1_kernel + 1 - self.primary_kernel) // 2 + 1


# CapsNetConfig's computation options at the paper's values
PAPER_COMPUTATION = {
    "primary_grouping": "paper",
    "primary_squash": "capsule",
    "squash": "sabour",
    "class_squash": "capsule",
    "routing_softmax": "classes",
    "routing_logits": "image",
    "routing_batch": 0,
    "routing_prior": False,
    "input_mean": 0.0,
    "input_std": 1.0,
}
# paper: capsule i = (row, col, type) holds channels t*K .. t*K + K-1 at one position;
# view: the NCHW conv output's values in memory order, viewed (B, -1, K), as `view(B, -1, 8)` of
#   one conv, or of K convs stacked on dim 1, gives: a capsule is K neighbours of one map
PRIMARY_GROUPINGS = ("paper", "view")
# capsule: each capsule's K values (the paper); map: each of the K values over all I capsules
PRIMARY_SQUASH_AXES = ("capsule", "map")
# capsule: each class capsule's D values (the paper); classes: each of the D values over the J classes
# (squash(s, dim=1) of (B, J, D)); all: the whole (J, D) map of an image at once; value: each value
# on its own (a squash summing over an axis of size 1, as squash(s.unsqueeze(-1)) of (B, J, D) gives)
CLASS_SQUASH_AXES = ("capsule", "classes", "all", "value")
SQUASH_FORMS = ("sabour", "efficient")  # Eq. 1 of Sabour et al.; Mazzia et al.'s (1 - e^-|s|) s/|s|
# Dynamic routing's options (capsviz.routing.dynamic_routing_options): what the couplings sum to 1
# over, and whether the routing logits are each image's own, averaged over the images routed together
# or summed over them (`b += a.sum(0)`, as some public code writes it)
ROUTING_SOFTMAX = ("classes", "inputs")
ROUTING_LOGITS = ("image", "batch", "batch-sum")


@dataclass(frozen=True)
class EfficientCapsConfig:
    """Efficient-CapsNet (Mazzia et al. 2021): a BatchNorm conv stack, depthwise primary capsules
    and one pass of self-attention routing. Defaults: the paper's MNIST model (161k parameters
    without the decoder)."""

    routing: ClassVar[str | None] = FAMILIES["efficient"].routing
    run_options: ClassVar[tuple[str, ...]] = ("reconstruction",)

    family: str = "efficient"
    in_size: int = 28
    in_channels: int = 1
    num_classes: int = 10
    # Conv 5x5, 3x3, 3x3, 3x3 stride 2, each ReLU then BatchNorm: 28 -> 24 -> 22 -> 20 -> 9
    conv_channels: tuple[int, int, int, int] = (32, 64, 64, 128)
    primary_caps: int = 16  # the depthwise conv's conv_channels[-1] outputs as 16 capsules of 8
    primary_dim: int = 8
    digit_dim: int = 16
    reconstruction: bool = True  # Sabour et al.'s decoder + 0.392 * mean squared error
    decoder_hidden: tuple[int, int] = (512, 1024)

    @property
    def decodes(self) -> bool:
        return self.reconstruction

    @property
    def primary_grid(self) -> int:
        """Side of the last conv's map; the depthwise primary-capsule kernel spans all of it (9 at 28x28)."""
        return (self.in_size - 4 - 2 - 2 - 3) // 2 + 1


@dataclass(frozen=True)
class MatrixCapsConfig:
    """Matrix capsules with EM routing (Hinton et al. 2018, Fig. 1). Defaults: the paper's model."""

    routing: ClassVar[str | None] = FAMILIES["matrix"].routing
    run_options: ClassVar[tuple[str, ...]] = ("final_lambda",)
    decodes: ClassVar[bool] = False

    family: str = "matrix"
    in_size: int = 32  # 32 smallNORB crops, 28 MNIST
    in_channels: int = 1
    num_classes: int = 5
    A: int = 32  # Conv1 channels
    B: int = 32  # primary capsule types
    C: int = 32  # ConvCaps1 types
    D: int = 32  # ConvCaps2 types
    routing_iterations: int = 3
    coord_add: bool = True
    final_lambda: float = 0.3  # inverse temperature at the last iteration; larger saturates the logistic (see em_routing)


@dataclass(frozen=True)
class CNNConfig:
    """The baseline CNNs the papers compare with; `kind` picks which one."""

    routing: ClassVar[str | None] = FAMILIES["cnn"].routing
    run_options: ClassVar[tuple[str, ...]] = ()
    decodes: ClassVar[bool] = False

    family: str = "cnn"
    kind: str = "mnist"  # mnist | multimnist | smallnorb
    in_size: int = 28
    in_channels: int = 1
    num_classes: int = 10
    dropout: float = 0.5


ModelConfig = CapsNetConfig | MatrixCapsConfig | CNNConfig | EfficientCapsConfig
# What a CapsNet's couplings may be in training (`couplings`, `--couplings`) and at inference
# (`routing=`): every vector-capsule routing in capsviz.registry.ROUTINGS
COUPLINGS = vector_routings()

PRESETS: dict[str, ModelConfig] = {
    "capsnet": CapsNetConfig(),
    # CPU-friendly: 64 Conv1 channels and 8 primary types cut the dominant PrimaryCaps conv ~16x.
    "capsnet-small": CapsNetConfig(conv1_channels=64, primary_types=8),
    "capsnet-multimnist": CapsNetConfig(in_size=36),
    "capsnet-affine": CapsNetConfig(in_size=40),
    "matrix": MatrixCapsConfig(),
    # 2 EM iterations, not the paper's 3: a small model learns faster with them and each step is cheaper (RESULTS.md).
    "matrix-small": MatrixCapsConfig(A=64, B=8, C=16, D=16, routing_iterations=2),
    "efficient-capsnet": EfficientCapsConfig(),
    "cnn-mnist": CNNConfig(),
    "cnn-multimnist": CNNConfig(kind="multimnist", in_size=36),
    "cnn-smallnorb": CNNConfig(kind="smallnorb", in_size=32, num_classes=5),
    # CPU-friendly MNIST baseline for the robustness page: the smallNORB paper's CNN at 28x28 (3.3M).
    "cnn-small": CNNConfig(kind="smallnorb"),
}


def to_dict(config: ModelConfig) -> dict:
    d = asdict(config)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def config_from_dict(d: dict) -> ModelConfig:
    """Rebuild a config from checkpoint metadata, refusing unknown families or fields."""
    if not isinstance(d, dict) or d.get("family") not in FAMILIES:
        raise CapsvizError(f"unknown model family {d.get('family') if isinstance(d, dict) else d!r}")
    cls = FAMILIES[d["family"]].config_class
    names = {f.name for f in fields(cls)}
    unknown = set(d) - names
    if unknown:
        raise CapsvizError(f"unknown {d['family']} config fields: {sorted(unknown)}")
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
    try:
        return cls(**kw)
    except TypeError as e:
        raise CapsvizError(f"bad {d['family']} config: {e}") from None


def preset(name: str, **overrides) -> ModelConfig:
    if name not in PRESETS:
        raise CapsvizError(f"unknown model preset {name!r}; choose from {', '.join(PRESETS)}")
    d = to_dict(PRESETS[name])
    d.update({k: v for k, v in overrides.items() if v is not None})
    return config_from_dict(d)


def option(default, help: str, *, lo=None, hi=None, lo_open: bool = False, choices=None, unset: str = "", flag: str = "", parse=None):
    """A TrainRun field with what `capsviz train` says of it and accepts (capsviz.cli): `help`,
    the bounds [lo, hi] ((lo, hi] with `lo_open`), `choices` or a `parse` function that raises
    CapsvizError, what None means (`unset`), and a flag name other than the field's (`flag`)."""
    return field(
        default=default,
        metadata={"help": help, "lo": lo, "hi": hi, "lo_open": lo_open, "choices": choices, "unset": unset, "flag": flag, "parse": parse},
    )


@dataclass(frozen=True)
class TrainRun:
    """Everything that defines a run; saved in the checkpoint so a resume can check it. Every field
    is a flag of `capsviz train`, with the help and bounds given here."""

    model: str = option("capsnet-small", "model preset", choices=tuple(PRESETS))
    dataset: str = option(
        "mnist",
        f"training dataset: {', '.join(DATASET_NAMES)}, or your own images as {', '.join(k + ':PATH' for k in USER_KINDS)} "
        "(docs/own-images.md)",
        parse=check_dataset,
    )
    epochs: int = option(10, "passes over the training set", lo=1, hi=100_000)
    batch_size: int = option(128, "images per step (per process under torchrun)", lo=1, hi=1 << 16)
    routing_iterations: int | None = option(None, "routing iterations", lo=1, hi=MAX_ITERATIONS, unset="the preset's")
    reconstruction: bool | None = option(
        None, "CapsNet: train without the decoder and its reconstruction loss", unset="the preset's", flag="--no-reconstruction"
    )
    couplings: str | None = option(
        None,
        "CapsNet: how DigitCaps' couplings are made (uniform, random: baselines without routing; "
        "self-attention: Efficient-CapsNet's, without its learned prior)",
        choices=COUPLINGS,
        unset="dynamic",
    )
    final_lambda: float | None = option(
        None, "matrix capsules: EM inverse temperature at the last iteration", lo=0, hi=100, lo_open=True, unset="the preset's, 0.3"
    )
    lr: float = option(1e-3, "Adam's learning rate (TensorFlow's defaults otherwise)", lo=0, hi=10, lo_open=True)
    lr_decay: float = option(0.96, "multiply the learning rate by this every --decay-steps steps", lo=1e-6, hi=1)
    # default_decay_steps(dataset) is what the CLI and the Train page pass
    decay_steps: int = option(2000, "steps per learning-rate decay", lo=1, unset="the dataset's: 2000; 20000 for multimnist")
    seed: int = option(0, "seed of the initial weights, the data order and the augmentation", lo=0, hi=2**63 - 1)
    device: str = option("auto", "auto, cpu, cuda, cuda:N or mps")
    precision: str = option("fp32", "arithmetic of the forward pass (autocast)", choices=("fp32", "bf16", "fp16"))
    compile: bool = option(
        False, "torch.compile the model (matrix capsules: the PyTorch EM core, used on a GPU or without the native kernel)"
    )
    data_dir: str | None = option(None, "folder holding the dataset files", unset="the usual places, as `capsviz data` lists them")
    resize: int | None = option(None, "make every image N x N pixels (your own images)", lo=MIN_SIZE, hi=MAX_SIZE, unset="their own size")
    train_limit: int | None = option(None, "use only this many training images (quick runs, tests)", lo=1, unset="all")
    test_limit: int | None = option(None, "evaluate on only this many test images", lo=1, unset="all")
    init_from: str | None = option(
        None, "start from this checkpoint's weights (fine-tuning: fresh optimiser and schedule)", unset="fresh weights"
    )
    margin_start: float = option(
        0.2, "matrix capsules: spread-loss margin at the start, rising to 0.9 (0.9: fixed, for fine-tuning)", lo=0, hi=0.9
    )
