"""The native EM kernel (capsviz/kernels/native): same results as the PyTorch routing, used only where it
may be (CPU, no gradients), and a clean fallback where it cannot be built."""

import shutil

import pytest
import torch

from capsviz.config import preset
from capsviz.kernels import native, policy
from capsviz.layers import ClassCaps, ConvCaps, coordinate_grid
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
def test_the_kernel_builds_here_and_serves_the_cpu_only():
    assert native.available(), native.reason()
    assert native.reason() is None
    assert policy.native_em(torch.zeros(1)) and not policy.native_em(torch.zeros(1, device="meta"))


def _layer_outputs_and_grads(layer, pose, a, size=1.0):
    """Outputs and every gradient of a loss that weights each output differently."""
    layer.zero_grad()
    pose, a = pose.clone().requires_grad_(), a.clone().requires_grad_()
    if isinstance(layer, ConvCaps):
        mu, act, _ = layer(pose, a)
    else:
        res = layer(pose, a)
        mu, act = res.mu, res.a
    ((mu / size).sin().sum() + (act * torch.linspace(0, 1, act.numel()).view_as(act)).sum()).backward()
    return mu.detach() / size, act.detach(), pose.grad * size, a.grad, layer.W.grad, layer.beta_u.grad, layer.beta_a.grad


@needs_compiler
@pytest.mark.parametrize(
    "stride,types,iterations,case",
    [
        (2, 4, 3, "random"),
        (1, 4, 2, "random"),
        (2, 8, 1, "random"),
        (1, 16, 2, "random"),
        (2, 4, 3, "huge"),
        (1, 4, 3, "zero_a"),
        (2, 4, 3, "same"),
        (2, 4, 2, "uncovered"),
    ],
)
def test_conv_caps_kernel_equals_pytorch_forward_and_backward(stride, types, iterations, case, monkeypatch):
    """Poses, activations and the gradients of poses, activations in, W and both betas agree with
    PyTorch's autograd through the unrolled EM. Strides 1 and 2 (border capsules reach fewer
    positions), slot counts that are and are not multiples of 16 (4 types x 9 = 36 is padded,
    16 x 9 = 144 is not), 1-3 iterations, poses of size 1e6, all-zero activations and identical
    poses (zero variance: the floor), and a grid whose last row and column lie in no receptive
    field (stride 2 over 8: the kernel gathers the slots itself and must leave them untouched)."""
    torch.manual_seed(0)
    layer = ConvCaps(in_types=types, out_types=5, kernel=3, stride=stride, iterations=iterations, final_lambda=0.3)
    with torch.no_grad():
        layer.beta_u.normal_()
        layer.beta_a.normal_()
    pose, a = torch.randn(3, 7, 7, types, 16), torch.rand(3, 7, 7, types)
    size = 1.0
    if case == "huge":
        pose, size = pose * 1e6, 1e6
    elif case == "zero_a":
        a = torch.zeros_like(a)
    elif case == "same":
        pose = pose[:1, :1, :1].expand_as(pose).contiguous()
    elif case == "uncovered":
        pose, a = torch.randn(3, 8, 8, types, 16), torch.rand(3, 8, 8, types)
        pose[:, 7], pose[:, :, 7] = 1e3, -1e3  # outside every receptive field: no say in the scale
    fast, slow = _both(lambda: _layer_outputs_and_grads(layer, pose, a, size), monkeypatch)
    _close(fast, slow)
    if case == "uncovered":
        g_pose, g_a = fast[2], fast[3]
        assert g_pose[:, 7].abs().sum() == 0 and g_pose[:, :, 7].abs().sum() == 0 and g_a[:, 7].abs().sum() == 0
        assert g_pose[:, :7, :7].abs().sum() > 0


@needs_compiler
@pytest.mark.parametrize("coords", [True, False])
def test_class_caps_kernel_equals_pytorch(coords, monkeypatch):
    torch.manual_seed(1)
    grid = coordinate_grid(torch.linspace(0.1, 0.9, 3)) if coords else None
    layer = ClassCaps(in_types=16, num_classes=10, iterations=2, final_lambda=0.3, coords=grid)
    with torch.no_grad():
        layer.beta_u.normal_()
    pose, a = torch.randn(4, 3, 3, 16, 16), torch.rand(4, 3, 3, 16)
    _close(*_both(lambda: _layer_outputs_and_grads(layer, pose, a), monkeypatch))


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


@needs_compiler
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_training_step_takes_the_kernel_and_matches_pytorch(precision, monkeypatch):
    """The whole model under the trainer's objective: same loss and same gradient for every
    parameter with and without the kernel, in float32 and under bfloat16 autocast."""
    from capsviz.devices import autocast
    from capsviz.train import objective

    torch.manual_seed(0)
    model = build_model(preset("matrix-small", in_size=28, num_classes=10))
    x, y = torch.rand(12, 1, 28, 28), torch.randint(0, 10, (12,))
    calls = []
    real = native.em_routing
    monkeypatch.setattr(native, "em_routing", lambda *a, **k: calls.append(1) or real(*a, **k))

    def step():
        model.zero_grad()
        with autocast(torch.device("cpu"), precision):
            loss = objective(model, model(x, y), x, y, 0.5)
        loss.backward()
        return [loss.detach()] + [p.grad.clone() for p in model.parameters()]

    fast, slow = _both(step, monkeypatch)
    assert len(calls) == 3  # ConvCaps1, ConvCaps2 and the class capsules, once each
    if precision == "fp32":
        _close(fast, slow)
    else:  # PyTorch makes the class votes in bfloat16 under autocast, the kernel in float32
        torch.testing.assert_close(fast[0], slow[0], rtol=1e-2, atol=0)
        for f, s in zip(fast[1:], slow[1:], strict=True):
            assert torch.isfinite(f).all()
            assert torch.nn.functional.cosine_similarity(f.flatten().float(), s.flatten().float(), dim=0) > 0.99


@needs_compiler
def test_bad_input_is_refused_not_read_out_of_bounds():
    assert native.available()
    poses, W = torch.randn(1, 16, 16), torch.randn(16, 2, 4, 4)
    lower = torch.arange(16).view(1, 16)
    for bad in (lower + 5, lower - 1):  # slots naming lower capsules that aren't there
        with pytest.raises(ValueError, match="rejected"):
            native.em_routing(poses, W, torch.rand(1, 16), torch.zeros(2), torch.zeros(2), bad, [0.3], 1e-4)
    a, mu = native.em_routing(poses, W, torch.rand(1, 16), torch.zeros(2), torch.zeros(2), lower, [0.3], 1e-4)
    assert a.shape == (1, 1, 2) and mu.shape == (1, 1, 2, 16) and torch.isfinite(mu).all()


@needs_compiler
def test_subnormals_are_flushed_only_inside_the_kernel():
    """The kernel flushes subnormal floats for speed and restores the thread's mode afterwards."""
    assert native.available()
    tiny = torch.tensor([1e-39])  # subnormal in float32
    assert (tiny * 1.0).item() != 0
    native.em_routing(
        torch.randn(1, 16, 16),
        torch.randn(16, 2, 4, 4),
        torch.rand(1, 16),
        torch.zeros(2),
        torch.zeros(2),
        torch.arange(16).view(1, 16),
        [0.3],
        1e-4,
    )
    assert (tiny * 1.0).item() != 0


def test_without_a_compiler_capsviz_routes_with_pytorch(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setenv("CAPSVIZ_CACHE", str(tmp_path))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    assert not native.available()
    assert "no-such-compiler" in native.reason()
    assert not policy.native_em(torch.zeros(1))
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


@needs_compiler
@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 baseline flags")
def test_the_narrowest_vector_build_agrees_too(monkeypatch, tmp_path):
    """The kernel's vector width follows the CPU it is built for (16 floats with AVX-512, 8 with
    AVX2, else 4); a machine tests its own width everywhere else. Built here for baseline x86-64
    (4 floats), it must agree with PyTorch as well."""
    monkeypatch.setattr(native, "FLAGS", ["-march=x86-64" if f == "-march=native" else f for f in native.FLAGS])
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setenv("CAPSVIZ_CACHE", str(tmp_path))
    assert native.available(), native.reason()
    torch.manual_seed(0)
    layer = ConvCaps(in_types=4, out_types=5, kernel=3, stride=2, iterations=3, final_lambda=0.3)
    pose, a = torch.randn(3, 8, 8, 4, 16), torch.rand(3, 8, 8, 4)
    _close(*_both(lambda: _layer_outputs_and_grads(layer, pose, a), monkeypatch))
