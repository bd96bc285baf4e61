"""Every fast path in capsviz.kernels equals the reference path it stands in for, in value and,
where it has a backward, in gradient; and the kernel policy says which path runs where and why.
(The Fourier convolution and the native EM kernel have files of their own: test_kernels_fourier.py,
test_kernels_native.py.)"""

import pytest
import torch
import torch.nn.functional as F

from capsviz.config import preset
from capsviz.kernels import gemm, paths, policy, reference_only, why_off
from capsviz.kernels.conv import conv2d_nhwc
from capsviz.models import build_model
from capsviz.routing import dynamic_routing, em_routing


def test_the_policy_lists_every_path_with_a_reason():
    listed = paths("cpu")
    names = [p.path for p in listed]
    for name in (policy.FOURIER, policy.IM2COL, policy.MKL_PACKED, policy.ONEDNN_PACKED, policy.VOTE_GEMM):
        assert name in names
    for name in (policy.HAND_BACKWARD, policy.NATIVE_EM, policy.CENTRED_EM, policy.COMPILED_EM, policy.SLICES):
        assert name in names
    assert all(p.reason for p in listed)
    gpu = {p.path: p for p in paths("cuda")}  # asks nothing of a GPU: a description only
    assert not gpu[policy.FOURIER].on and "CPU" in gpu[policy.FOURIER].reason
    assert not gpu[policy.NATIVE_EM].on and gpu[policy.VOTE_GEMM].on
    with reference_only():
        assert not any(p.on for p in paths("cpu"))
        assert why_off(policy.HAND_BACKWARD) == "reference_only() is on"
    assert why_off(policy.COMPILED_EM) == "turned on by --compile only"


def test_the_environment_switch_turns_the_native_kernel_off(monkeypatch):
    from capsviz.kernels import native

    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setenv(native.NATIVE_ENV, "0")
    assert not policy.native_em(torch.zeros(1))
    assert why_off(policy.NATIVE_EM) == "turned off by CAPSVIZ_NATIVE=0"


@pytest.mark.parametrize(
    "B,C,grad,device,expected",
    [
        (policy.MIN_BATCH, 64, True, "cpu", "fourier"),  # PrimaryCaps training
        (policy.MIN_BATCH - 1, 64, False, "cpu", "im2col"),  # PrimaryCaps, small batch
        (policy.MIN_BATCH, 1, True, "cpu", "im2col"),  # Conv1 training: oneDNN's weight gradient is slow
        (policy.MIN_BATCH, 1, False, "cpu", None),  # Conv1 inference: oneDNN serves
        (policy.MIN_BATCH, 64, True, "meta", None),  # off the CPU: the reference (cuDNN on a GPU)
    ],
)
def test_the_policy_picks_a_convolution_by_device_batch_and_channels(B, C, grad, device, expected):
    x = torch.empty(1, 20, 20, C, device=device).expand(B, 20, 20, C)
    with torch.set_grad_enabled(grad):
        assert policy.conv_path(x, torch.empty(64, C, 9, 9), 2) == expected
        with reference_only():
            assert policy.conv_path(x, torch.empty(64, C, 9, 9), 2) is None


@pytest.mark.parametrize("stride,k", [(2, 9), (1, 3)])
def test_im2col_conv_matches_conv2d(stride, k, monkeypatch):
    per_image = ((12 - k) // stride + 1) ** 2 * k * k * 5 * 8  # float64 patch-gradient bytes of one image
    monkeypatch.setattr(gemm, "FOLD_BYTES", 2 * per_image)  # folded in slices of 2, 2, 1 images
    torch.manual_seed(0)
    x = torch.randn(5, 12, 12, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(7, 5, k, k, dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, dtype=torch.float64, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        ours = conv2d_nhwc(x, w, b, stride, "im2col")
    assert max(saved) <= max(x.numel(), w.numel())  # the patches (k*k/stride^2 times the input) are not kept
    ref = F.conv2d(x.permute(0, 3, 1, 2), w, b, stride=stride).permute(0, 2, 3, 1)
    torch.testing.assert_close(ours, ref)
    g = torch.randn_like(ref)
    ga = torch.autograd.grad(ours, (x, w, b), g)
    gb = torch.autograd.grad(ref, (x, w, b), g)
    for u, v in zip(ga, gb, strict=True):
        torch.testing.assert_close(u, v)


@pytest.mark.parametrize("kind,dtype", [("mkl", torch.float32), ("onednn", torch.bfloat16)])
def test_a_packed_gemm_equals_the_plain_matmul(kind, dtype):
    if policy.packed_gemm(dtype) != kind:
        pytest.skip(f"{kind} does not pack {dtype} here: {why_off(policy.MKL_PACKED if kind == 'mkl' else policy.ONEDNN_PACKED)}")
    torch.manual_seed(0)
    w, cols = torch.randn(24, 200).to(dtype), torch.randn(36, 200).to(dtype)
    packed, rows, _ = gemm.pack_gemm_weight(w, 36, kind)
    ref = cols.float() @ w.float().t()
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=0.02, atol=0.1)
    torch.testing.assert_close(gemm.packed_matmul(kind, cols, packed, w, rows).float(), ref, **tol)
    torch.testing.assert_close(gemm.packed_matmul(kind, cols[:5], packed, w, rows).float(), ref[:5], **tol)  # other heights


def _reference_dynamic(u_hat, r):
    with reference_only():
        return dynamic_routing(u_hat, r).v


@pytest.mark.parametrize("r", [1, 2, 3, 5])
def test_hand_written_routing_backward_is_the_exact_gradient(r):
    torch.manual_seed(r)
    u_hat = (0.5 * torch.randn(2, 7, 4, 5, dtype=torch.float64)).requires_grad_()
    out = dynamic_routing(u_hat, r).v
    assert type(out.grad_fn).__name__ == "DynamicRoutingBackward"  # the hand-written path ran
    assert type(_reference_dynamic(u_hat, r).grad_fn).__name__ != "DynamicRoutingBackward"
    assert torch.autograd.gradcheck(lambda u: dynamic_routing(u, r).v, (u_hat,))
    w = torch.randn(2, 4, 5, dtype=torch.float64)  # a loss that weighs every output differently
    (mine,) = torch.autograd.grad((out * w).sum(), u_hat)
    (ref,) = torch.autograd.grad((_reference_dynamic(u_hat, r) * w).sum(), u_hat)
    torch.testing.assert_close(out, _reference_dynamic(u_hat, r))
    torch.testing.assert_close(mine, ref)
    u32 = u_hat.detach().float().requires_grad_()  # float32 too, on the (B, J, I, D) layout training uses
    (g32,) = torch.autograd.grad((dynamic_routing(u32, r).v * w.float()).sum(), u32)
    torch.testing.assert_close(g32, ref.float(), rtol=1e-4, atol=1e-6)


def test_autocast_and_traces_keep_autograd_routing():
    u_hat = torch.randn(2, 7, 4, 5, requires_grad=True)
    assert type(dynamic_routing(u_hat, 3, record=True).v.grad_fn).__name__ != "DynamicRoutingBackward"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        v = dynamic_routing(u_hat, 3).v
    assert type(v.grad_fn).__name__ != "DynamicRoutingBackward"
    v.float().sum().backward()
    assert torch.isfinite(u_hat.grad).all() and u_hat.grad.abs().sum() > 0


def test_compiled_em_core_matches_eager():
    """`--compile` swaps in a torch.compile'd EM core; it must compute the same values and
    gradients. Compiling this one small geometry takes a few seconds on a CPU."""
    torch.manual_seed(0)
    V = torch.randn(3, 20, 4, 16, requires_grad=True)
    a_in = torch.rand(3, 20)

    def run():
        res = em_routing(V, a_in, 2, 0.1, -0.1)
        (g,) = torch.autograd.grad((res.a.sum() + res.mu.pow(2).sum()), V)
        return res.a.detach(), res.mu.detach(), g

    eager = run()
    policy.compile_em()
    try:
        assert policy.compiled_em() and why_off(policy.COMPILED_EM) is None
        compiled = run()
    finally:
        policy.compile_em(False)
    for e, c in zip(eager, compiled, strict=True):
        torch.testing.assert_close(c, e, rtol=1e-4, atol=1e-5)


def _step(model, x, y):
    """Scores and every parameter's gradient after one loss that weighs each output differently."""
    model.zero_grad()
    out = model(x, y)
    loss = (out.scores * torch.linspace(0.5, 1.5, out.scores.numel()).view_as(out.scores)).sum() + out.capsules.sin().sum()
    if out.reconstruction is not None:
        loss = loss + out.reconstruction.square().sum()
    loss.backward()
    return [out.scores.detach()] + [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("name,batch", [("capsnet-small", 4), ("capsnet-small", policy.MIN_BATCH), ("matrix-small", 10)])
def test_a_whole_model_agrees_with_its_reference_path(name, batch):
    """Every layer's fast paths at once (convolutions, vote GEMMs, the hand backward, the native
    kernel or the centred vote GEMM, slices) against every layer's reference, forward and
    backward, in training and at inference."""
    torch.manual_seed(0)
    over = dict(in_size=28, num_classes=10) if name.startswith("matrix") else dict(conv1_channels=16, primary_types=4)
    model = build_model(preset(name, **over))
    x, y = torch.rand(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
    fast = _step(model, x, y)
    with reference_only():
        slow = _step(model, x, y)
    for f, s in zip(fast, slow, strict=True):
        torch.testing.assert_close(f, s, rtol=2e-4, atol=2e-4 * max(1.0, float(s.abs().max())))
    model.eval()
    with torch.inference_mode():
        one = model(x[:1]).scores  # batch 1: the packed GEMM where there is one
        with reference_only():
            torch.testing.assert_close(one, model(x[:1]).scores, rtol=1e-4, atol=1e-5)
