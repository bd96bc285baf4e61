"""MultiMNIST (Sabour et al. 6.1): two digits of different classes from the same split, each
shifted by up to 4 px in each direction on a 36x36 canvas, summed and clipped at 1."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from capsviz.data.transforms import place

SIZE = 36
MAX_SHIFT = 4
OFFSET = (SIZE - 28) // 2  # a 28x28 digit centred on 36x36 has its corner at 4


@dataclass
class MultiBatch:
    """images (B, 36, 36) float in [0, 1]; parts (B, 2, 36, 36) the two shifted digits;
    labels (B, 2); shifts (B, 2, 2) as (dy, dx) per digit; index (B, 2) source indices."""

    images: torch.Tensor
    parts: torch.Tensor
    labels: torch.Tensor
    shifts: torch.Tensor
    index: torch.Tensor


def sample_pairs(labels: torch.Tensor, n: int, generator: torch.Generator, first: torch.Tensor | None = None) -> torch.Tensor:
    """(n, 2) indices: a first digit (random, or given) and a second of a different class."""
    by_class = [torch.nonzero(labels == k).flatten() for k in range(10)]
    counts = torch.tensor([len(c) for c in by_class])
    if first is None:
        first = torch.randint(0, len(labels), (n,), generator=generator)
    c1 = labels[first]
    c2 = (c1 + torch.randint(1, 10, (n,), generator=generator)) % 10  # any class but c1
    pick = (torch.rand(n, generator=generator) * counts[c2]).long()
    table = torch.nn.utils.rnn.pad_sequence(by_class, batch_first=True)  # (10, max count)
    second = table[c2, pick]
    return torch.stack([first, second], 1)


def compose(images: torch.Tensor, labels: torch.Tensor, index: torch.Tensor, shifts: torch.Tensor) -> MultiBatch:
    """Build pairs from source images (N, 28, 28) uint8, index (B, 2) and shifts (B, 2, 2) in [-4, 4]."""
    B = index.shape[0]
    digits = images[index.flatten()].float().div(255.0)  # (2B, 28, 28)
    s = shifts.reshape(-1, 2) + OFFSET
    parts = place(digits, SIZE, s[:, 0], s[:, 1]).view(B, 2, SIZE, SIZE)
    return MultiBatch(parts.sum(1).clamp(max=1.0), parts, labels[index], shifts, index)


def random_shifts(n: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randint(-MAX_SHIFT, MAX_SHIFT + 1, (n, 2, 2), generator=generator)


class MultiMNIST:
    """Endless seeded training pairs, and fixed evaluation sets, from one MNIST split."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, seed: int = 0):
        self.images, self.labels = images, labels
        self.generator = torch.Generator().manual_seed(seed)

    def batch(self, n: int) -> MultiBatch:
        g = self.generator
        return compose(self.images, self.labels, sample_pairs(self.labels, n, g), random_shifts(n, g))

    def eval_set(self, pairs_per_digit: int = 1000, seed: int = 0, limit: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed evaluation pairs: (index (M, 2), shifts (M, 2, 2)) for M = N * pairs_per_digit,
        each source digit taken first `pairs_per_digit` times (the paper: 1000). Compose
        slices with `compose` to keep memory small. `limit` keeps the first M rows."""
        g = torch.Generator().manual_seed(seed)
        first = torch.arange(len(self.labels)).repeat_interleave(pairs_per_digit)
        if limit is not None:
            first = first[torch.randperm(len(first), generator=g)[:limit]]
        index = sample_pairs(self.labels, len(first), g, first=first)
        return index, random_shifts(len(first), g)
