"""Synthetic stand-ins for the real datasets, written by fixtures so tests run without ../shared."""

from pathlib import Path

import numpy as np

from capsviz.data.idx import write_idx


def synthetic_digits(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Learnable stand-ins for MNIST: class k is a bright bar at row 2 + 2k, plus noise."""
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) % 10).astype(np.uint8)
    rng.shuffle(labels)
    images = (rng.random((n, 28, 28)) * 40).astype(np.uint8)
    for i, k in enumerate(labels):
        r = 2 + 2 * int(k)
        images[i, r : r + 2, 4:24] = 255
    return images, labels


def write_mnist(folder: Path, n_train: int = 600, n_test: int = 200) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n, seed in (("train", n_train, 0), ("t10k", n_test, 1)):
        images, labels = synthetic_digits(n, seed)
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", labels)
    return folder
