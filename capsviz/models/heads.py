"""What every vector-capsule model does with its class capsules (`ClassCapsules`): scores from their
lengths, Sabour et al.'s masked decoder (`Decoder`), the margin and reconstruction losses."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from capsviz.losses import margin_loss, reconstruction_loss
from capsviz.models import ModelOutput


class Decoder(nn.Module):
    """FC 512 ReLU -> FC 1024 ReLU -> FC C*H*W sigmoid, fed all DigitCaps vectors but one masked to 0."""

    def __init__(self, *, num_classes: int, dim: int, hidden: tuple[int, int], out_size: int, channels: int = 1):
        super().__init__()
        self.out_size, self.channels = out_size, channels
        self.net = nn.Sequential(
            nn.Linear(num_classes * dim, hidden[0]),
            nn.ReLU(inplace=True),
            nn.Linear(hidden[0], hidden[1]),
            nn.ReLU(inplace=True),
            nn.Linear(hidden[1], channels * out_size * out_size),
            nn.Sigmoid(),
        )

    def forward(self, capsules: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """capsules (B, J, D), mask (B, J) one-hot -> (B, H, W) grey, (B, C, H, W) with C > 1 channels."""
        x = (capsules * mask.unsqueeze(-1)).flatten(1)  # (B, J*D)
        S = self.out_size
        return self.net(x).view(-1, S, S) if self.channels == 1 else self.net(x).view(-1, self.channels, S, S)


class ClassCapsules:
    """What a vector-capsule model does with its class capsules v (B, J, D): their lengths are the
    class scores, the masked decoder redraws the input from them, and the margin loss plus the
    scaled reconstruction error trains them. Models set `config` (num_classes, digit_dim) and
    `decoder` (a Decoder or None)."""

    config: object
    decoder: Decoder | None

    def _outputs(self, v: torch.Tensor, y: torch.Tensor | None, reconstruct: bool) -> ModelOutput:
        """The decoder is masked by the true label(s) y when given (training; y may be (B,) class
        ids or a float (B, J) 0/1 mask), otherwise by the longest capsule: reconstruction (B, H, W).
        With (B, k) class ids (MultiMNIST's two labels) each labelled capsule is decoded on its own,
        as in the paper: reconstruction (B, k, H, W)."""
        lengths = v.norm(dim=-1)  # (B, J)
        out = ModelOutput(scores=lengths, capsules=v)
        if self.decoder is not None and reconstruct:
            if y is not None and y.dim() == 2 and not y.is_floating_point():  # one reconstruction per labelled digit
                B, k = y.shape
                each = v.unsqueeze(1).expand(B, k, *v.shape[1:]).reshape(B * k, *v.shape[1:])
                rec = self.decoder(each, F.one_hot(y.flatten(), v.shape[1]).to(v.dtype))
                out.reconstruction = rec.view(B, k, *rec.shape[1:])
            else:
                out.reconstruction = self.decoder(v, self._mask(lengths, y))
        return out

    def reconstruction_loss(self, reconstruction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Sabour et al.'s: 0.0005 x the sum of squared pixel differences."""
        return reconstruction_loss(reconstruction, target)

    def loss(self, out: ModelOutput, y: torch.Tensor, target: torch.Tensor | None = None, **_) -> torch.Tensor:
        """The paper's objective: margin loss (Eq. 4) over every labelled class, plus the scaled
        reconstruction error when there is a decoder. target: what the decoder should redraw (the
        input, or MultiMNIST's two digits apart, one per labelled capsule)."""
        targets = y if y.dim() == 1 else F.one_hot(y, self.config.num_classes).sum(1).clamp(max=1)  # (B, J) 0/1
        loss = margin_loss(out.scores.float(), targets)
        if out.reconstruction is not None:
            loss = loss + self.reconstruction_loss(out.reconstruction.float(), target)
        return loss

    def classify(self, x: torch.Tensor) -> ModelOutput:
        """Class scores alone: no reconstruction drawn."""
        return self(x, reconstruct=False)

    def _mask(self, lengths: torch.Tensor, y: torch.Tensor | None) -> torch.Tensor:
        J = lengths.shape[1]
        if y is None:
            return F.one_hot(lengths.argmax(1), J).to(lengths.dtype)
        if y.dim() == 1:
            return F.one_hot(y, J).to(lengths.dtype)
        return y.to(lengths.dtype)

    def decode(self, vector: torch.Tensor, capsule: torch.Tensor | int) -> torch.Tensor:
        """Reconstruct from any (perturbed) D-vector placed in any capsule's slot.

        vector (B, D) or (D,); capsule: class index (int or (B,) tensor) -> (B, H, W)."""
        if self.decoder is None:
            raise ValueError(f"this {type(self).__name__} was built without a decoder")
        vector = vector.reshape(-1, self.config.digit_dim)
        B, J = vector.shape[0], self.config.num_classes
        idx = torch.as_tensor(capsule, device=vector.device).expand(B)
        mask = F.one_hot(idx, J).to(vector.dtype)  # (B, J)
        capsules = vector.unsqueeze(1).expand(B, J, -1)  # (B, J, D): only the masked slot survives
        return self.decoder(capsules, mask)
