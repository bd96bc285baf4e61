"""Your own model: a CapsNet written the way public PyTorch repositories write it, saved as a
state dict, imported (capsviz.adapter, `capsviz import`) and opened like a capsviz model."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

from capsviz import checkpoint as ckpt
from capsviz.adapter import CapsuleAdapter, read_state_dict
from capsviz.errors import CapsvizError

ROOT = Path(__file__).resolve().parents[1]


def sabour_squash(s: torch.Tensor) -> torch.Tensor:
    """Eq. 1: |s|^2 / (1 + |s|^2) s / |s|."""
    n2 = (s * s).sum(-1, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-12)


class PublicCapsNet(nn.Module):
    """The layout most public PyTorch CapsNets share, written here from the paper: Conv1, PrimaryCaps
    as one conv (viewed (B, T, K, G, G)) or as K convs of T channels (one per capsule dimension),
    DigitCaps with W (1, I, J, D, K), dynamic routing with 3 iterations, and the decoder."""

    def __init__(self, *, c1=256, types=32, dim=8, classes=10, D=16, modulelist=False, decoder=True, size=28):
        super().__init__()
        self.types, self.dim, self.modulelist = types, dim, modulelist
        self.conv1 = nn.Conv2d(1, c1, 9)
        if modulelist:
            self.primary_capsules = nn.ModuleList(nn.Conv2d(c1, types, 9, stride=2) for _ in range(dim))
        else:
            self.primary_capsules = nn.Conv2d(c1, types * dim, 9, stride=2)
        G = (size - 8 - 9) // 2 + 1  # Conv1 9x9, then 9x9 stride 2
        self.digit_capsules = nn.Module()
        self.digit_capsules.W = nn.Parameter(torch.randn(1, G * G * types, classes, D, dim))  # N(0, 1), as public repos start it
        self.digit_capsules.register_buffer("b_init", torch.zeros(1, G * G * types, classes))  # an all-zero buffer some repos keep
        self.decoder = (
            nn.Sequential(nn.Linear(classes * D, 512), nn.ReLU(), nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, size * size), nn.Sigmoid())
            if decoder
            else None
        )

    def forward(self, x):
        B = x.shape[0]
        h = F.relu(self.conv1(x))
        if self.modulelist:
            u = torch.stack([conv(h) for conv in self.primary_capsules], dim=-1)  # (B, T, G, G, K)
        else:
            p = self.primary_capsules(h)  # (B, T*K, G, G)
            u = p.view(B, self.types, self.dim, *p.shape[-2:]).permute(0, 1, 3, 4, 2)  # (B, T, G, G, K)
        u = sabour_squash(u.reshape(B, -1, self.dim))  # (B, I, K), i = (type, row, col)
        u_hat = (self.digit_capsules.W @ u[:, :, None, :, None]).squeeze(-1)  # (B, I, J, D)
        b = torch.zeros(u_hat.shape[:3])  # (B, I, J)
        for t in range(3):
            c = b.softmax(dim=2)
            v = sabour_squash((c.unsqueeze(-1) * u_hat).sum(1))  # (B, J, D)
            if t < 2:
                b = b + (u_hat * v.unsqueeze(1)).sum(-1)
        return v


def save_public(path: Path, **kw) -> PublicCapsNet:
    torch.manual_seed(0)
    net = PublicCapsNet(**kw).eval()
    torch.save(net.state_dict(), path)
    return net


def images(n=4) -> torch.Tensor:
    torch.manual_seed(1)
    return torch.rand(n, 1, 28, 28)


@pytest.mark.parametrize("modulelist", [False, True], ids=["one-conv", "modulelist"])
def test_imported_model_gives_the_original_class_capsules(tmp_path, modulelist):
    """The paper-size network (W (1, 1152, 10, 16, 8)): the same v as its own forward."""
    net = save_public(tmp_path / "net.pt", modulelist=modulelist)
    adapter = CapsuleAdapter(read_state_dict(tmp_path / "net.pt"))
    model = adapter.model()
    assert model.digits.W.shape == (1152, 10, 16, 8)
    x = images()
    with torch.no_grad():
        want, got = net(x), model(x).capsules
    assert float(want.norm(dim=-1).max()) > 0.1  # capsules long enough for the comparison to mean something
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    assert any("b_init" in n and "ignored" in n for n in adapter.notes)
    wrong = CapsuleAdapter(read_state_dict(tmp_path / "net.pt"), primary_order="position-major").model()
    with torch.no_grad():
        assert not torch.allclose(wrong(x).capsules, want, atol=1e-3)  # the numbering matters, and the default is this layout's
