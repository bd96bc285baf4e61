"""The baseline CNNs of both papers, sized to their parameter counts."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from capsviz.families.cnn.config import CNNConfig
from capsviz.models import ModelOutput


def _conv(cin: int, cout: int, k: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, k, padding=k // 2), nn.ReLU(inplace=True)]


class BaselineCNN(nn.Module):
    """kind='mnist': conv 256, 256, 128 (5x5, stride 1), FC 328, FC 192, dropout, softmax (35.4M).
    kind='multimnist': conv 512 (9x9) and 256 (5x5) each with 2x2 max-pool, FC 1024, FC 10,
    sigmoid (24.56M at 36x36). kind='smallnorb': conv 32 and 64 (5x5) each with 2x2 max-pool,
    FC 1024 with dropout, softmax (4.25M at 32x32; the paper rounds to 4.2M).
    Convolutions pad to 'same' size: only then do the papers' parameter counts come out."""

    def __init__(self, *, config: CNNConfig):
        super().__init__()
        self.config = cfg = config
        s, c, n = cfg.in_size, cfg.in_channels, cfg.num_classes
        if cfg.kind == "mnist":
            feats = [*_conv(c, 256, 5), *_conv(256, 256, 5), *_conv(256, 128, 5)]
            flat = 128 * s * s
            head = [
                nn.Linear(flat, 328),
                nn.ReLU(inplace=True),
                nn.Linear(328, 192),
                nn.ReLU(inplace=True),
                nn.Dropout(cfg.dropout),
                nn.Linear(192, n),
            ]
        elif cfg.kind == "multimnist":
            feats = [*_conv(c, 512, 9), nn.MaxPool2d(2), *_conv(512, 256, 5), nn.MaxPool2d(2)]
            flat = 256 * (s // 4) ** 2
            head = [nn.Linear(flat, 1024), nn.ReLU(inplace=True), nn.Linear(1024, n)]
        elif cfg.kind == "smallnorb":
            feats = [*_conv(c, 32, 5), nn.MaxPool2d(2), *_conv(32, 64, 5), nn.MaxPool2d(2)]
            flat = 64 * (s // 4) ** 2
            head = [nn.Linear(flat, 1024), nn.ReLU(inplace=True), nn.Dropout(cfg.dropout), nn.Linear(1024, n)]
        else:
            raise ValueError(f"unknown baseline kind {cfg.kind!r}")
        self.features = nn.Sequential(*feats)
        self.head = nn.Sequential(nn.Flatten(), *head)
        self.multi_label = cfg.kind == "multimnist"  # sigmoid per class: two digits may be present

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, *, record: bool = False, **_) -> ModelOutput:
        logits = self.head(self.features(x))  # (B, J)
        scores = torch.sigmoid(logits) if self.multi_label else logits.softmax(-1)
        return ModelOutput(scores=scores, logits=logits)

    def loss(self, out: ModelOutput, y: torch.Tensor, target=None, **_) -> torch.Tensor:
        """Cross-entropy of the softmax; with two labels (MultiMNIST) sigmoid cross-entropy on both."""
        if y.dim() == 2:
            both = F.one_hot(y, out.logits.shape[1]).sum(1).clamp(max=1).float()  # (B, J) 0/1
            return F.binary_cross_entropy_with_logits(out.logits.float(), both)
        return F.cross_entropy(out.logits.float(), y)

    def classify(self, x: torch.Tensor) -> ModelOutput:
        return self(x)
