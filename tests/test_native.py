"""The native EM kernel (capsviz/native): same results as the PyTorch routing, used only where it
may be (CPU, no gradients), and a clean fallback where it cannot be built."""

import shutil

import pytest
import torch

from capsviz import native
from capsviz.config import preset
from capsviz.layers import ClassCaps, ConvCaps, coordinate_grid, use_native
from capsviz.models import build_model

needs_compiler = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="no C++ compiler")


@pytest.fixture
def pytorch_only(monkeypatch):
    """Route with PyTorch, as on a machine without a compiler."""
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", "turned off for this test")


def _both(fn, monkeypatch):
    """fn() with the kernel, then with PyTorch."""
    assert native.available(), native.reason()
    fast = fn()
    with monkeypatch.context() as m:
        m.setattr(native, "_lib", None)
        m.setattr(native, "_why", "off")
        slow = fn()
    return fast, slow


def _close(fast, slow, tol=2e-4):
    for f, s in zip(fast, slow, strict=True):
        assert torch.isfinite(f).all()
        torch.testing.assert_close(f, s, rtol=tol, atol=tol * max(1.0, float(s.abs().max())))


@needs_compiler
def test_the_kernel_builds_here():
    assert native.available(), native.reason()
    assert native.reason() is None


@needs_compiler
@pytest.mark.parametrize(
    "stride,types,iterations,case",
    [
        (2, 4, 3, "random"),
        (1, 4, 2, "random"),
        (2, 8, 1, "random"),
        (1, 5, 3, "random"),
        (2, 4, 3, "huge"),
        (1, 4, 3, "zero_a"),
        (2, 4, 3, "same"),
    ],
)
def test_conv_caps_kernel_equals_pytorch(stride, types, iterations, case, monkeypatch):
    """Strides 1 and 2 (border capsules reach fewer positions), slot counts that are and are not
    multiples of 16 (4 types x 9 = 36 is padded, 16 x 9 = 144 is not), 1-3 iterations, poses of
    size 1e6, all-zero activations and identical poses (zero variance: the floor)."""
    torch.manual_seed(0)
    layer = ConvCaps(in_types=types, out_types=5, kernel=3, stride=stride, iterations=iterations, final_lambda=0.3)
    with torch.no_grad():
        layer.beta_u.normal_()
        layer.beta_a.normal_()
    pose, a = torch.randn(3, 7, 7, types, 16), torch.rand(3, 7, 7, types)
    if case == "huge":
        pose = pose * 1e6
    elif case == "zero_a":
        a = torch.zeros_like(a)
    elif case == "same":
        pose = pose[:1, :1, :1].expand_as(pose).contiguous()

    def run():
        with torch.no_grad():
            mu, act, _ = layer(pose, a)
        return mu / (1e6 if case == "huge" else 1.0), act

    _close(*_both(run, monkeypatch))


@needs_compiler
@pytest.mark.parametrize("coords", [True, False])
def test_class_caps_kernel_equals_pytorch(coords, monkeypatch):
    torch.manual_seed(1)
    grid = coordinate_grid(torch.linspace(0.1, 0.9, 3)) if coords else None
    layer = ClassCaps(in_types=16, num_classes=10, iterations=2, final_lambda=0.3, coords=grid)
    pose, a = torch.randn(4, 3, 3, 16, 16), torch.rand(4, 3, 3, 16)

    def run():
        with torch.no_grad():
            res = layer(pose, a)
        return res.mu, res.a

    _close(*_both(run, monkeypatch))


@needs_compiler
def test_model_predictions_agree_with_and_without_the_kernel(monkeypatch):
    torch.manual_seed(0)
    model = build_model(preset("matrix-small", in_size=28, num_classes=10)).eval()
    x = torch.rand(20, 1, 28, 28)  # more than one slice for the PyTorch path

    def run():
        with torch.inference_mode():
            out = model(x)
        return out.scores, out.capsules

    fast, slow = _both(run, monkeypatch)
    _close(fast, slow)
    assert (fast[0].argmax(1) == slow[0].argmax(1)).all()


def test_gradients_never_take_the_kernel():
    layer = ConvCaps(in_types=2, out_types=3, kernel=3, stride=1, iterations=2, final_lambda=0.3)
    pose = torch.randn(1, 5, 5, 2, 16)
    assert not use_native(pose, layer.W)  # gradients on, W requires them
    with torch.no_grad():
        assert use_native(pose, layer.W) == native.available()
    assert not use_native(pose.to("meta"), layer.W.detach())  # not on the CPU
    mu, act, _ = layer(pose, torch.rand(1, 5, 5, 2))
    (mu.sum() + act.sum()).backward()
    assert layer.W.grad is not None and torch.isfinite(layer.W.grad).all()


@needs_compiler
def test_bad_input_is_refused_not_read_out_of_bounds():
    assert native.available()
    poses, W = torch.randn(1, 1, 16, 16), torch.randn(16, 2, 4, 4)
    lower = torch.arange(16).view(1, 16)
    with pytest.raises(ValueError, match="rejected"):
        native.em_routing(poses, W, torch.rand(1, 1, 16), torch.zeros(2), torch.zeros(2), lower + 5, 16, [0.3], 1e-4)
    a, mu = native.em_routing(poses, W, torch.rand(1, 1, 16), torch.zeros(2), torch.zeros(2), lower, 16, [0.3], 1e-4)
    assert a.shape == (1, 1, 2) and mu.shape == (1, 1, 2, 16) and torch.isfinite(mu).all()


def test_without_a_compiler_capsviz_routes_with_pytorch(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setenv("CAPSVIZ_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    assert not native.available()
    assert "no-such-compiler" in native.reason()
    model = build_model(preset("matrix-small", in_size=28, num_classes=10)).eval()
    with torch.no_grad():
        out = model(torch.rand(2, 1, 28, 28))
    assert torch.isfinite(out.scores).all()
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setenv("CAPSVIZ_NATIVE", "0")
    assert not native.available() and "CAPSVIZ_NATIVE" in native.reason()


@needs_compiler
def test_a_failed_build_leaves_no_library_behind(monkeypatch, tmp_path):
    fake = tmp_path / "cxx"
    fake.write_text("#!/bin/sh\necho 'boom' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setenv("CAPSVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", str(fake))
    assert not native.available() and "boom" in native.reason()
    assert not list((tmp_path / "cache").rglob("*.so"))
