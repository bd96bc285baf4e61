"""The Fourier-domain convolution equals the direct one, in value and gradient, and is used where
it pays."""

import pytest
import torch
import torch.nn.functional as F

from capsviz.config import preset
from capsviz.kernels import fourier, policy
from capsviz.kernels.conv import conv2d_nhwc
from capsviz.models import build_model


def reference(x, w, stride):
    return F.conv2d(x.permute(0, 3, 1, 2), w, stride=stride).permute(0, 2, 3, 1)


@pytest.mark.parametrize(
    "B,H,W,C,O,k,stride",
    [
        (3, 20, 20, 5, 7, 9, 2),  # PrimaryCaps' geometry, narrow
        (2, 21, 20, 4, 6, 9, 2),  # a last row no output reads (it must get zero gradient)
        (2, 13, 13, 3, 4, 5, 1),  # stride 1, odd transform length
        (2, 12, 14, 3, 5, 3, 3),  # stride 3, non-square, even length
        (1, 9, 9, 2, 3, 9, 2),  # kernel as large as the image: one output
    ],
)
def test_equals_the_direct_convolution_in_value_and_gradient(B, H, W, C, O, k, stride):
    torch.manual_seed(0)
    x = torch.randn(B, H, W, C, dtype=torch.float64)
    w = torch.randn(O, C, k, k, dtype=torch.float64)
    ref = reference(x, w, stride)
    g = torch.randn_like(ref)
    xs, ws = x.float().requires_grad_(), w.float().requires_grad_()
    ours = fourier.conv2d(xs, ws, stride)
    assert ours.shape == ref.shape
    gx, gw = torch.autograd.grad(ours, (xs, ws), g.float())
    rx, rw = torch.autograd.grad(reference(x.requires_grad_(), w.requires_grad_(), stride), (x, w), g)
    for a, b in ((ours, ref), (gx, rx), (gw, rw)):
        assert (a.double() - b).abs().max() <= 2e-6 * b.abs().max()
    used = stride * (ref.shape[1] - 1) + k
    if used < H:
        assert gx[:, used:].abs().max() == 0


def test_only_the_gradients_asked_for_are_computed():
    x, w = torch.randn(2, 20, 20, 4), torch.randn(6, 4, 9, 9, requires_grad=True)
    (gw,) = torch.autograd.grad(fourier.conv2d(x, w, 2).sum(), (w,))
    torch.testing.assert_close(gw, torch.autograd.grad(reference(x, w, 2).sum(), (w,))[0], rtol=1e-4, atol=1e-4)


def picks_fourier(B, H, W, C, O, k, stride):
    """Whether the kernel policy convolves such a batch through the Fourier domain."""
    x = torch.empty(1, H, W, C).expand(B, H, W, C)  # (B, H, W, C) without B images of memory
    return policy.conv_path(x, torch.empty(O, C, k, k), stride) == "fourier"


def test_it_serves_large_batches_of_wide_large_kernel_convolutions_only():
    assert picks_fourier(128, 20, 20, 256, 256, 9, 2)  # the paper's PrimaryCaps in training
    assert picks_fourier(128, 20, 20, 64, 64, 9, 2)  # capsnet-small's
    assert not picks_fourier(policy.MIN_BATCH - 1, 20, 20, 256, 256, 9, 2)  # batch 1 keeps its packed GEMM
    assert not picks_fourier(128, 28, 28, 1, 256, 9, 1)  # Conv1: one input channel, all transform
    assert not picks_fourier(128, 12, 12, 64, 64, 1, 1)  # 1x1: nothing to save
    assert not fourier.cheaper(8, 8, 64, 64, 9, 2)  # a kernel larger than the image


def test_the_policy_takes_it_in_float32_and_not_under_bfloat16(monkeypatch):
    calls = []
    real = fourier.conv2d
    monkeypatch.setattr(fourier, "conv2d", lambda *a: calls.append(1) or real(*a))
    torch.manual_seed(0)
    x = torch.rand(policy.MIN_BATCH, 20, 20, 64)
    w, b = torch.randn(64, 64, 9, 9) * 0.02, torch.randn(64)
    ref = reference(x, w, 2) + b
    assert policy.conv_path(x, w, 2) == "fourier"
    torch.testing.assert_close(conv2d_nhwc(x, w, b, 2, "fourier"), ref, rtol=1e-4, atol=1e-4)
    assert calls == [1]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        path = policy.conv_path(x, w, 2)
        y = conv2d_nhwc(x, w, b, 2, path)
    assert path == "im2col" and calls == [1] and y.dtype == torch.bfloat16


def test_a_capsnet_trains_the_same_through_either_convolution(monkeypatch):
    """One training step's loss and every gradient agree whichever way PrimaryCaps convolves
    (and Conv1, whose training path is the im2col GEMM, agrees with oneDNN's at inference)."""
    torch.manual_seed(0)
    m = build_model(preset("capsnet-small"))
    x, y = torch.rand(policy.MIN_BATCH, 1, 28, 28), torch.randint(0, 10, (policy.MIN_BATCH,))
    assert picks_fourier(policy.MIN_BATCH, 20, 20, 64, 64, 9, 2)
    with torch.no_grad():
        scores = m(x, y).scores
    torch.testing.assert_close(m(x, y).scores, scores, rtol=1e-5, atol=1e-6)

    def step():
        m.zero_grad()
        out = m(x, y)
        loss = out.scores.square().sum() + out.reconstruction.square().sum()
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}

    loss_f, grads_f = step()
    monkeypatch.setattr(policy, "MIN_BATCH", 10**9)
    loss_d, grads_d = step()
    torch.testing.assert_close(loss_f, loss_d, rtol=1e-5, atol=1e-5)
    for name, g in grads_d.items():
        torch.testing.assert_close(grads_f[name], g, rtol=1e-3, atol=1e-5 * g.abs().max().item(), msg=name)


def test_bench_times_both_convolutions_and_the_parts_of_a_training_step(capsys):
    from capsviz.bench import capsnet_step_parts, convolution_table, convolutions
    from capsviz.cli import main

    rows = convolutions(steps=1, batches=(2, policy.MIN_BATCH), names=["capsnet", "capsnet-small"])
    assert [r["model"] for r in rows] == ["capsnet"] * 2 + ["capsnet-small"] * 2
    assert [r["picked"] for r in rows if r["model"] == "capsnet"] == ["im2col", "fourier"]
    assert all(r[f"{way}_{t}_ms"] > 0 for r in rows for way in ("im2col", "fourier") for t in ("forward", "train"))
    assert "capsnet-small" in convolution_table(rows)
    parts = capsnet_step_parts("capsnet-small", steps=1)
    assert list(parts) == ["conv1", "primary", "routing", "decoder", "adam"] and min(parts.values()) > 0
    assert main(["bench", "--step-parts", "matrix-small"]) == 2  # a preset without Conv1 is refused by the parser, not a traceback
    assert "invalid choice" in capsys.readouterr().err
