"""MNIST and Fashion-MNIST as uint8 tensors, validated, loaded once per process."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from capsviz.data.idx import read_idx
from capsviz.data.sources import SOURCES, find_file, locate, missing_message
from capsviz.errors import CapsvizError
from capsviz.i18n import t

CLASS_NAMES = {
    "mnist": tuple(str(d) for d in range(10)),
    "fashion-mnist": ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
}


@dataclass(frozen=True)
class ImageSet:
    """One split: images (N, H, W) uint8, labels (N,) int64, and where the files were."""

    name: str
    split: str
    images: torch.Tensor
    labels: torch.Tensor
    origin: str

    def __len__(self) -> int:
        return len(self.labels)


def load_idx_pair(images_path: Path, labels_path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    images = read_idx(images_path, expect_ndim=3)
    labels = read_idx(labels_path, expect_ndim=1)
    if images.dtype != np.uint8 or labels.dtype != np.uint8:
        raise CapsvizError(t("{path}: expected unsigned-byte images and labels", path=images_path))
    if images.shape[1:] != (28, 28):
        raise CapsvizError(
            t("{path}: expected 28x28 images, found {height}x{width}", path=images_path, height=images.shape[1], width=images.shape[2])
        )
    if len(images) == 0:
        raise CapsvizError(
            t("{path}: holds no images; delete it and download the dataset again (python -m capsviz data --download)", path=images_path)
        )
    if len(images) != len(labels):
        raise CapsvizError(
            t(
                "{images_path} holds {images} images but {labels_path} holds {labels} labels",
                images_path=images_path,
                images=len(images),
                labels_path=labels_path,
                labels=len(labels),
            )
        )
    if labels.size and labels.max() > 9:
        raise CapsvizError(t("{path}: labels must be 0-9, found {found}", path=labels_path, found=labels.max()))
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


@lru_cache(maxsize=8)
def _load(name: str, split: str, data_dir: str | None, _env: str | None, _cwd: str) -> ImageSet:
    """Cached per place that decides where files are found (argument, environment, cwd)."""
    source = SOURCES[name]
    place, places = locate(source, data_dir)
    if place is None:
        raise CapsvizError(missing_message(source, places))
    prefix = "train" if split == "train" else "t10k"
    img = find_file(place, f"{prefix}-images-idx3-ubyte")
    lab = find_file(place, f"{prefix}-labels-idx1-ubyte")
    images, labels = load_idx_pair(img, lab)
    return ImageSet(name, split, images, labels, str(place))


def load_mnist(name: str = "mnist", split: str = "train", data_dir: str | Path | None = None) -> ImageSet:
    """The train or test split of MNIST or Fashion-MNIST. Raises CapsvizError saying what to do."""
    if name not in SOURCES:
        raise CapsvizError(t("unknown dataset {dataset}; choose mnist or fashion-mnist", dataset=repr(name)))
    if split not in ("train", "test"):
        raise CapsvizError(t("unknown split {split}; choose train or test", split=repr(split)))
    return _load(name, split, str(data_dir) if data_dir else None, os.environ.get("CAPSVIZ_DATA_DIR"), os.getcwd())
