"""Analyses the pages draw: perturbation grids (Fig. 4 of Sabour et al.) and per-image predictions.

One image layout everywhere (pages, analyses, capsviz.viz): float in [0, 1], as the model reads
it without the batch axis, a grey image without its channel axis: (H, W) grey, (C, H, W) colour
(C = 3). A decoder's reconstruction comes back the same way, so an input and its redrawing
always have one shape. Test sets stay uint8 (N, H, W) grey (MNIST) or (N, C, H, W) (a user's
images, capsviz.data.user); `image_at` takes one out in this layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

STEPS = np.round(np.linspace(-0.25, 0.25, 11), 2) + 0.0  # 11 values in [-0.25, 0.25]; + 0.0 drops a -0.0


@dataclass
class Prediction:
    scores: np.ndarray  # (J,)
    capsules: np.ndarray  # (J, 16)
    predicted: int
    reconstruction: np.ndarray | None  # (H, W) or (C, H, W) from the longest capsule


def coupling_entropy(c):
    """Entropy (nats) of couplings c (..., J) over the classes: log J when a capsule splits its vote
    evenly, 0 when it sends all of it to one class. The routing page, the lab, the tour and the
    playground all measure "how far from uniform" with it. numpy or torch in, the same kind out."""
    if isinstance(c, torch.Tensor):
        return -(c * c.clamp_min(1e-12).log()).sum(-1)
    c = np.asarray(c)
    return -(c * np.log(np.clip(c, 1e-12, 1))).sum(-1)


def as_batch(image: np.ndarray) -> torch.Tensor:
    """One (H, W) or (C, H, W) image in [0, 1] -> a (1, C, H, W) float32 batch (a copy: pages pass
    read-only arrays)."""
    H, W = image.shape[-2:]
    return torch.tensor(image, dtype=torch.float32).view(1, -1, H, W)


def as_input_batch(images: torch.Tensor) -> torch.Tensor:
    """uint8 test images (N, H, W) or (N, C, H, W) -> a float (N, C, H, W) batch in [0, 1]."""
    x = images.float().div(255)
    return x.unsqueeze(1) if x.dim() == 3 else x  # (N, C, H, W)


def image_at(images: torch.Tensor, i: int) -> np.ndarray:
    """Test image i of uint8 (N, H, W) or (N, C, H, W) -> (H, W) or (C, H, W) float32 in [0, 1]."""
    a = images[i].numpy().astype(np.float32) / 255.0
    return a[0] if a.ndim == 3 and a.shape[0] == 1 else a


@torch.no_grad()
def predict(model, image: np.ndarray) -> Prediction:
    """image (H, W) or (C, H, W) float in [0, 1] -> scores, capsule vectors and reconstruction."""
    out = model(as_batch(image))
    rec = out.reconstruction[0].numpy() if out.reconstruction is not None else None
    caps = out.capsules[0].numpy() if out.capsules is not None else None
    return Prediction(out.scores[0].numpy(), caps, int(out.scores[0].argmax()), rec)


@torch.no_grad()
def decode(model, vector: np.ndarray, capsule: int, deltas: np.ndarray | None = None) -> np.ndarray:
    """Reconstruction from `vector` (16,) plus `deltas` (16,) in capsule `capsule`'s slot -> (H, W) or (C, H, W)."""
    v = torch.as_tensor(vector, dtype=torch.float32) + (0 if deltas is None else torch.as_tensor(deltas, dtype=torch.float32))
    return model.decode(v, capsule)[0].numpy()


@torch.no_grad()
def perturbation_grid(model, vector: np.ndarray, capsule: int) -> np.ndarray:
    """(16, 11, H, W), or (16, 11, C, H, W) for colour: row d adds each of STEPS to dimension d
    alone, decoded in one batch."""
    D = len(vector)
    v = torch.as_tensor(vector, dtype=torch.float32).repeat(D, len(STEPS), 1)  # (D, 11, D)
    idx = torch.arange(D)
    v[idx, :, idx] += torch.as_tensor(STEPS, dtype=torch.float32)
    rec = model.decode(v.view(-1, D), capsule)  # (D*11, H, W) or (D*11, C, H, W)
    return rec.view(D, len(STEPS), *rec.shape[1:]).numpy()


def dimension_effect(grid: np.ndarray) -> np.ndarray:
    """(16,) mean absolute pixel change between the -0.25 and +0.25 ends of each row."""
    return np.abs(grid[:, -1] - grid[:, 0]).reshape(len(grid), -1).mean(axis=1)


@torch.no_grad()
def find_mistake(model, images: torch.Tensor, labels: torch.Tensor, seed: int, batch: int = 64) -> int | None:
    """A test image the model gets wrong, drawn uniformly among all its mistakes in `images`
    (N, H, W) or (N, C, H, W) uint8, or None. Scanning in a random order and stopping at the first mistake draws
    the same as listing every mistake first, but a 0.4%-error model needs ~250 images, not all N."""
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))
    for idx in order.split(batch):
        x = as_input_batch(images[idx])  # (b, C, H, W)
        wrong = (model(x).scores.argmax(1) != labels[idx]).nonzero().flatten()
        if len(wrong):
            return int(idx[wrong[0]])
    return None
