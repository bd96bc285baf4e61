"""Datasets: where they come from, what they hold, and batches ready for the model.

`describe()` lists what the app and `python -m capsviz data` show; `batches()` yields
(x, y) float batches for training and evaluation, augmented on the training device.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass

import torch

from capsviz.config import DATASETS, user_dataset
from capsviz.data import affine, multimnist
from capsviz.data.mnist import CLASS_NAMES, ImageSet, load_mnist
from capsviz.data.sources import SOURCES, locate, verify
from capsviz.data.transforms import random_shift, to_float
from capsviz.errors import CapsvizError
from capsviz.i18n import t


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    classes: tuple[str, ...]
    image_size: int
    origin: str | None  # folder the files came from, None when not found
    train_size: int
    test_size: int
    status: dict


def describe(name: str, data_dir=None) -> DatasetInfo:
    """What the app and the CLI list for a dataset; never raises for missing files."""
    source_name, size = DATASETS[name].source, DATASETS[name].in_size
    place, _ = locate(SOURCES[source_name], data_dir)
    sizes = {"train": 0, "test": 0}
    if place is not None:
        for split in sizes:
            try:
                sizes[split] = len(load_mnist(source_name, split, data_dir))
            except CapsvizError:
                pass
    status = verify(SOURCES[source_name], place) if place is not None else {}
    return DatasetInfo(name, CLASS_NAMES[source_name], size, str(place) if place else None, sizes["train"], sizes["test"], status)


def load_split(name: str, split: str, data_dir=None, resize: int | None = None) -> ImageSet:
    """A split of a built-in dataset, or of a user's (KIND:PATH, made `resize` x `resize`)."""
    if user_dataset(name):
        from capsviz.data.user import load_user

        data = load_user(name, resize)
        return data.train if split == "train" else data.test
    if name not in DATASETS:
        raise CapsvizError(t("unknown dataset {dataset}; choose from {choices}", dataset=repr(name), choices=", ".join(DATASETS)))
    if resize is not None:
        raise CapsvizError(t("--resize is for your own images; {name} keeps its {size}x{size}", name=name, size=DATASETS[name].in_size))
    return load_mnist(DATASETS[name].source, split, data_dir)


def model_test_set(dataset: str, size: int | None, channels: int, data_dir=None) -> ImageSet:
    """The test images to show a model of size x size inputs with `channels` channels trained on
    `dataset`: a built-in dataset's test split, or a user's read at the model's size (what
    training read). Raises CapsvizError when they cannot be had (the folder is gone, or now holds
    images of other channels than the model was trained on)."""
    if not user_dataset(dataset):
        return load_split(dataset, "test", data_dir)
    data = load_split(dataset, "test", resize=size)
    found = data.images.shape[1]
    if found != channels:
        said = dict(dataset=dataset, found=found, channels=channels)
        if (found, channels) == (1, 3):
            raise CapsvizError(t("{dataset} now holds grey images; this model was trained on colour ones", **said))
        if (found, channels) == (3, 1):
            raise CapsvizError(t("{dataset} now holds colour images; this model was trained on grey ones", **said))
        raise CapsvizError(t("{dataset} now holds images of {found} channels; this model was trained on {channels}", **said))
    return data


def class_names(dataset: str, resize: int | None = None) -> tuple[str, ...]:
    """What each class capsule of a model trained on `dataset` stands for (a model trained on a
    user's images records them too: CheckpointMeta.class_names)."""
    if user_dataset(dataset):
        from capsviz.data.user import load_user

        return load_user(dataset, resize).classes
    return CLASS_NAMES[DATASETS[dataset].source]


@dataclass(frozen=True)
class InputShape:
    """What a model for a dataset takes and tells apart."""

    size: int
    channels: int
    num_classes: int
    labels: int = 1  # labels per image: MultiMNIST's two digits


def input_shape(dataset: str, resize: int | None = None) -> InputShape:
    """The images' side and channels and the number of classes: a built-in dataset's from its
    declaration, a user's from its files (read once)."""
    if user_dataset(dataset):
        from capsviz.data.user import load_user

        data = load_user(dataset, resize)
        return InputShape(data.size, data.channels, len(data.classes))
    d = DATASETS[dataset]
    return InputShape(d.in_size, 1, len(CLASS_NAMES[d.source]), d.labels)


def batch_generator(seed: int, epoch: int, k: int) -> torch.Generator:
    """Each batch's own random stream, so a resumed run draws exactly what it would have drawn."""
    return torch.Generator().manual_seed((seed * 1_000_003 + epoch) * 1_000_003 + k)


def batches(
    name: str,
    data: ImageSet,
    batch_size: int,
    *,
    train: bool,
    seed: int = 0,
    epoch: int = 0,
    device="cpu",
    start: int = 0,
    limit: int | None = None,
    rank: int = 0,
    world: int = 1,
):
    """Yield (x (B, 1, S, S) float on device, y, target) in an order fixed by (seed, epoch).

    y is (B,) class ids, or (B, 2) for MultiMNIST. target is what a decoder should redraw: x
    itself, or for MultiMNIST the two shifted digits apart, (B, 2, S, S). Training batches are augmented: random
    +-2 px shifts (MNIST, Fashion-MNIST), fresh random pairs (MultiMNIST) or random
    placement on 40x40 (affNIST training). `start` skips that many batches (resuming);
    `rank`/`world` give each distributed process its own slice of every global batch."""
    n = len(data) if limit is None else min(limit, len(data))
    g = torch.Generator().manual_seed(seed * 7919 + epoch)
    order = torch.randperm(len(data), generator=g)[:n] if train else torch.arange(n)
    pin = torch.device(device).type == "cuda"
    if name == "multimnist" and not train:
        eval_index, eval_shifts = multimnist.MultiMNIST(data.images, data.labels).eval_set(pairs_per_digit=1, seed=0, limit=n)
    step = batch_size * world
    for k, i in enumerate(range(0, n, step)):
        if k < start:
            continue
        sl = slice(i + rank * batch_size, min(i + (rank + 1) * batch_size, n))
        idx = order[sl]
        if len(idx) == 0:
            continue
        bg = batch_generator(seed, epoch, k * world + rank)
        if name == "multimnist":
            if train:
                pairs = multimnist.sample_pairs(data.labels, len(idx), bg, first=idx)
                b = multimnist.compose(data.images, data.labels, pairs, multimnist.random_shifts(len(idx), bg))
            else:
                b = multimnist.compose(data.images, data.labels, eval_index[sl], eval_shifts[sl])
            x, y, parts = b.images.unsqueeze(1), b.labels, b.parts
        elif name == "affnist":
            imgs = data.images[idx]
            x = (affine.expanded(imgs, bg) if train else affine.affnist_like(imgs, seed=i)).unsqueeze(1)
            y = data.labels[idx]
        else:
            x, y = data.images[idx], data.labels[idx]
        if pin:
            x, y = x.pin_memory(), y.pin_memory()
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        if x.dtype == torch.uint8:
            x = to_float(x)
            if train:
                x = random_shift(x, 2, bg)
        yield x, y, (parts.to(device, non_blocking=True) if name == "multimnist" else x)


def prefetch(items, depth: int = 2):
    """Yield from `items`, produced up to `depth` ahead on a background thread, so a GPU step
    and the next batch's assembly overlap. Same items, same order; an exception in the
    producer is raised here; leaving the loop early stops the producer."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    quit_ = threading.Event()

    def offer(entry) -> bool:
        """Put unless the consumer has left (then nothing waits for the entry)."""
        while not quit_.is_set():
            try:
                q.put(entry, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def produce():
        try:
            for item in items:
                if not offer((item, None)):
                    return
            offer((done, None))
        except BaseException as e:  # handed to the consumer
            offer((done, e))

    worker = threading.Thread(target=produce, daemon=True, name="capsviz-prefetch")
    worker.start()
    try:
        while True:
            item, error = q.get()
            if error is not None:
                raise error
            if item is done:
                return
            yield item
    finally:
        quit_.set()
        worker.join(timeout=5)


def num_batches(n: int, batch_size: int, world: int = 1) -> int:
    return -(-n // (batch_size * world))


__all__ = [
    "DATASETS",
    "InputShape",
    "input_shape",
    "class_names",
    "DatasetInfo",
    "describe",
    "load_split",
    "model_test_set",
    "batches",
    "prefetch",
    "num_batches",
    "SOURCES",
]
