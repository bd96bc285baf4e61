"""MultiMNIST models on the pages that follow one image: a test digit alone, centred on their canvas."""

from __future__ import annotations

import numpy as np
import torch

from capsviz.i18n import t


def on_canvas(dataset: str, size: int) -> int:
    """How far (pixels each side) a 28x28 test digit is padded to be centred on the size x size
    canvas a model of `dataset` reads: MultiMNIST's 36x36 (capsviz.data.multimnist), where the digit
    sits with no shift, as the routing lab reads it for the digit error; 0 for any other model."""
    from capsviz.data import multimnist

    return multimnist.OFFSET if dataset == "multimnist" and size == multimnist.SIZE else 0


def centred(image: np.ndarray, pad: int) -> np.ndarray:
    """A picked image (H, W) padded by `pad` blank pixels on each side (on_canvas)."""
    return np.pad(image, pad) if pad else image


def centred_batch(images: torch.Tensor, pad: int) -> torch.Tensor:
    """A batch of test images (N, H, W) or (N, C, H, W) padded by `pad` blank pixels on each side."""
    return torch.nn.functional.pad(images, (pad,) * 4) if pad else images


def canvas_words(size: int, pad: int) -> str:
    """What a MultiMNIST model is shown on a page that follows one image (pad from on_canvas)."""
    return t(
        "This model was trained on MultiMNIST: two training digits overlapping on a {size}x{size} canvas. Here it reads one digit "
        "alone, centred on that canvas ({pad} blank pixels on each side of the 28x28 digit), as the routing lab reads it for its "
        "digit error. The **MultiMNIST** page follows pairs of digits.",
        size=size,
        pad=pad,
    )
