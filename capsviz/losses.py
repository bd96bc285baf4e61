"""The papers' objectives. Each returns the mean over the batch of a per-image loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def margin_loss(
    lengths: torch.Tensor, targets: torch.Tensor, m_plus: float = 0.9, m_minus: float = 0.1, lambda_: float = 0.5
) -> torch.Tensor:
    """Eq. 4 of Sabour et al., summed over classes. targets: (B, J) 0/1 (several may be 1) or (B,) ids."""
    T = _one_hot(targets, lengths.shape[1], lengths.dtype)
    present = T * F.relu(m_plus - lengths) ** 2
    absent = lambda_ * (1 - T) * F.relu(lengths - m_minus) ** 2
    return (present + absent).sum(1).mean()


def reconstruction_loss(reconstruction: torch.Tensor, images: torch.Tensor, scale: float = 0.0005) -> torch.Tensor:
    """Sum of squared pixel differences per image, scaled by 0.0005 so it does not dominate."""
    diff = reconstruction.flatten(1) - images.flatten(1).to(reconstruction.dtype)
    return scale * (diff * diff).sum(1).mean()


def spread_loss(activations: torch.Tensor, targets: torch.Tensor, margin: float) -> torch.Tensor:
    """Eq. 3 of Hinton et al.: sum over wrong classes i of max(0, m - (a_t - a_i))^2."""
    a_t = activations.gather(1, targets.view(-1, 1))  # (B, 1)
    loss = F.relu(margin - (a_t - activations)) ** 2  # (B, J)
    wrong = 1 - F.one_hot(targets, activations.shape[1]).to(loss.dtype)
    return (loss * wrong).sum(1).mean()


def spread_margin(progress: float, start: float = 0.2, end: float = 0.9, ramp: float = 0.5) -> float:
    """Spread-loss margin: linear from `start` to `end` over the first `ramp` of training, then held,
    so the last epochs train at the full margin."""
    return start + (end - start) * min(1.0, max(0.0, progress) / ramp)


def _one_hot(targets: torch.Tensor, J: int, dtype) -> torch.Tensor:
    if targets.dim() == 1:
        return F.one_hot(targets, J).to(dtype)
    return targets.to(dtype)
