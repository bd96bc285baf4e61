import json
import resource

import pytest
import torch

from capsviz.config import PRESETS, config_from_dict, preset, to_dict
from capsviz.errors import CapsvizError
from capsviz.families.capsnet.config import CapsNetConfig
from capsviz.families.matrix_capsnet.config import MatrixCapsConfig
from capsviz.kernels.conv import WeightCache
from capsviz.kernels.dynamic import VoteWeights
from capsviz.kernels.gemm import onednn_bf16_gemm
from capsviz.kernels.slices import in_chunks
from capsviz.layers import ConvCaps
from capsviz.models import build_model, count_parameters


def within(n, target, tol):
    return abs(n - target) / target <= tol


def test_paper_parameter_counts():
    assert within(count_parameters(build_model(CapsNetConfig())), 8.2e6, 0.01)
    assert within(count_parameters(build_model(CapsNetConfig(reconstruction=False))), 6.8e6, 0.01)
    assert within(count_parameters(build_model(PRESETS["capsnet-multimnist"])), 11.36e6, 0.01)
    assert within(count_parameters(build_model(PRESETS["cnn-mnist"])), 35.4e6, 0.01)
    assert within(count_parameters(build_model(PRESETS["cnn-multimnist"])), 24.56e6, 0.01)
    # 4,252,549: the paper's "4.2M" is this count rounded down
    assert within(count_parameters(build_model(PRESETS["cnn-smallnorb"])), 4.2e6, 0.015)
    assert within(count_parameters(build_model(PRESETS["matrix-small"])), 68e3, 0.015)
    assert within(count_parameters(build_model(PRESETS["matrix"])), 310e3, 0.025)


@pytest.mark.parametrize("size", [28, 32, 36, 40])
def test_capsnet_shapes_every_input_size(size):
    m = build_model(CapsNetConfig(in_size=size, conv1_channels=16, primary_types=4))
    out = m(torch.rand(2, 1, size, size), record=True)
    grid = (size - 17) // 2 + 1  # Conv1 9x9 then PrimaryCaps 9x9 stride 2: 28 -> 6, 40 -> 12
    assert out.scores.shape == (2, 10) and out.capsules.shape == (2, 10, 16)
    assert out.reconstruction.shape == (2, size, size)
    assert out.trace.c.shape == (3, 2, grid * grid * 4, 10)


@pytest.mark.parametrize("size", [28, 32])
def test_matrix_shapes_and_trace(size):
    m = build_model(MatrixCapsConfig(in_size=size, A=8, B=4, C=4, D=4, num_classes=10))
    out = m(torch.rand(2, 1, size, size), record=True)
    n = {28: 3, 32: 4}[size]
    assert out.scores.shape == (2, 10) and out.capsules.shape == (2, 10, 16)
    assert out.trace.R.shape == (3, 2, n * n * 4, 10)
    assert set(out.layer_traces) == {"convcaps1", "convcaps2", "class"}
    assert ((out.scores >= 0) & (out.scores <= 1)).all()


def test_coordinate_addition_changes_votes_only_in_the_right_entries():
    from capsviz.families.matrix_capsnet.model import GEOMETRY
    from capsviz.layers import coordinate_grid, receptive_centres

    c = receptive_centres(28, GEOMETRY)
    torch.testing.assert_close(c, (torch.tensor([8.0, 12.0, 16.0]) + 0.5) / 28)
    g = coordinate_grid(c)
    assert (g[..., [3, 7]] != 0).all() and (g[..., [i for i in range(16) if i not in (3, 7)]] == 0).all()
    torch.testing.assert_close(g[2, 0, 3], c[2])
    torch.testing.assert_close(g[0, 2, 7], c[2])


@pytest.mark.parametrize("name", ["capsnet-small", "matrix-small", "cnn-smallnorb"])
def test_gradients_reach_every_parameter(name):
    from capsviz.train import objective

    torch.manual_seed(0)
    m = build_model(preset(name, in_size=28, num_classes=10))
    x, y = torch.rand(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    objective(m, m(x, y), x, y, 0.5).backward()
    missing = [n for n, p in m.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all() or p.grad.abs().sum() == 0]
    assert not missing


def test_decoder_masks_by_label_longest_or_any_vector():
    torch.manual_seed(0)
    m = build_model(preset("capsnet-small")).eval()
    x = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        out = m(x)
        longest = out.scores.argmax(1)
        torch.testing.assert_close(out.reconstruction, m.decode(out.capsules[torch.arange(2), longest], longest))
        other = (longest + 1) % 10
        by_label = m(x, other).reconstruction
        torch.testing.assert_close(by_label, m.decode(out.capsules[torch.arange(2), other], other))
        v = out.capsules[0, 3].clone()
        base = m.decode(v, 3)
        v[5] += 0.25
        assert not torch.allclose(m.decode(v, 3), base)
        assert m.decode(out.capsules[0, 3], 3).shape == (1, 28, 28)
        pair = torch.tensor([[1, 7], [4, 2]])  # MultiMNIST: each labelled digit decoded on its own
        rec = m(x, pair).reconstruction
        assert rec.shape == (2, 2, 28, 28)
        torch.testing.assert_close(rec[1, 0], m.decode(out.capsules[1, 4], 4)[0])
        torch.testing.assert_close(rec[0, 1], m.decode(out.capsules[0, 7], 7)[0])


def test_chunked_forward_and_gradients_equal_unchunked():
    torch.manual_seed(0)
    m = build_model(preset("capsnet-small", reconstruction=False))
    x = torch.rand(19, 1, 28, 28)
    u = m.primary_capsules(x)
    from capsviz.routing import dynamic_routing_ji

    calls = []

    def f(u):
        calls.append(u.shape[0])
        return dynamic_routing_ji(m.digits(u), 3).v

    b = f(u)
    (gb,) = torch.autograd.grad(b.square().sum(), m.digits.W)
    for keep, runs in [(0, [8, 8, 3, 3, 8, 8]), (8, [8, 8, 3, 3, 8]), (100, [8, 8, 3])]:
        calls.clear()
        a = in_chunks(f, u, chunk=8, keep=keep)
        (ga,) = torch.autograd.grad(a.square().sum(), m.digits.W)
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-7)
        assert calls == runs  # slices past the first `keep` images run again in backward


def test_matrix_vote_count_matches_the_routed_layers():
    m = build_model(preset("matrix-small", in_size=28, num_classes=10))
    out = m(torch.rand(1, 1, 28, 28), record=True)
    routed = sum(t.R.shape[2:].numel() for t in out.layer_traces.values())  # R (T, B, *lower, upper)
    assert m.votes_per_image == 16 * routed == 815616


@pytest.mark.parametrize("stride,pose_scale", [(2, 1.0), (1, 1.0), (2, 1e6)])
def test_conv_caps_centred_vote_gemm_equals_the_public_em_path(stride, pose_scale):
    """The training/inference path (votes centred inside one GEMM, a bound as scale) gives the
    same poses, activations and gradients as em_routing on einsum votes (the record path)."""
    torch.manual_seed(0)
    layer = ConvCaps(in_types=4, out_types=5, kernel=3, stride=stride, iterations=3, final_lambda=0.3)
    with torch.no_grad():
        layer.beta_u.normal_()
        layer.beta_a.normal_()
    pose = (pose_scale * torch.randn(3, 7, 7, 4, 16)).requires_grad_()
    a = torch.rand(3, 7, 7, 4)
    outs = []
    for record in (False, True):
        layer.zero_grad()
        pose.grad = None
        mu, act, _ = layer(pose, a, record=record)
        ((mu / pose_scale).sin().sum() + act.sum()).backward()
        outs.append((mu.detach(), act.detach(), layer.W.grad.clone(), layer.beta_a.grad.clone(), pose.grad.clone()))
    fast, public = outs
    assert torch.isfinite(fast[0]).all() and torch.isfinite(fast[2]).all()
    for f, p in zip(fast, public, strict=True):
        torch.testing.assert_close(f, p, rtol=2e-4, atol=2e-4 * float(p.abs().max()))


def test_config_round_trip_and_bad_configs():
    for cfg in PRESETS.values():
        assert config_from_dict(to_dict(cfg)) == cfg
    with pytest.raises(CapsvizError, match="unknown model family"):
        config_from_dict({"family": "rnn"})
    with pytest.raises(CapsvizError, match="unknown capsnet config fields"):
        config_from_dict({"family": "capsnet", "evil": 1})
    with pytest.raises(CapsvizError, match="unknown model preset"):
        preset("nope")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
@pytest.mark.parametrize("name", ["capsnet", "matrix-small"])
def test_cuda_forward_matches_cpu(name):
    torch.manual_seed(0)
    m = build_model(preset(name, in_size=28, num_classes=10)).eval()
    x = torch.rand(4, 1, 28, 28)
    with torch.no_grad():
        cpu = m(x).scores
        gpu = m.cuda()(x.cuda()).scores.cpu()
    torch.testing.assert_close(cpu, gpu, rtol=1e-3, atol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
@pytest.mark.parametrize("name", ["capsnet-small", "matrix-small", "cnn-small"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_cuda_training_step_reaches_every_parameter(name, precision):
    from capsviz.devices import autocast
    from capsviz.train import objective

    torch.manual_seed(0)
    m = build_model(preset(name, in_size=28, num_classes=10)).cuda().train()
    x, y = torch.rand(8, 1, 28, 28, device="cuda"), torch.arange(8, device="cuda") % 10
    with autocast(torch.device("cuda"), precision):
        loss = objective(m, m(x, y), x, y, 0.5)
    loss.backward()
    assert torch.isfinite(loss)
    for n, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), n
        assert p.grad.abs().sum() > 0, n


def test_inference_weight_cache_follows_weight_updates():
    torch.manual_seed(0)
    m = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)).eval()
    x = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        a = m(x).scores
        m.primary.conv.weight.mul_(1.5)  # an in-place update, as an optimiser step does
        b = m(x).scores
        with torch.autocast("cpu", dtype=torch.bfloat16):
            c = m(x).scores
    m.primary.kernel_cache = WeightCache()
    with torch.no_grad():
        fresh = m(x).scores
    assert not torch.allclose(a, b)
    torch.testing.assert_close(b, fresh)
    torch.testing.assert_close(c.float(), fresh, rtol=0.05, atol=0.02)
    with torch.no_grad():  # the DigitCaps layout cache too
        m.digits.W.mul_(-1.0)
        d = m(x).capsules
        m.digits.kernel_cache = VoteWeights()
        torch.testing.assert_close(d, m(x).capsules)
        with torch.enable_grad():
            torch.testing.assert_close(d, m(x).capsules.detach())  # training path: no cache


def test_batch_one_inference_uses_the_packed_weight_and_agrees():
    """A single image goes through MKL's pre-packed GEMM; its capsules must match the training
    path's (plain im2col GEMM), and a weight update must re-pack."""
    torch.manual_seed(0)
    m = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)).eval()
    x = torch.rand(3, 1, 28, 28)
    with torch.enable_grad():
        ref = m(x).capsules.detach()
    with torch.inference_mode():
        one = torch.cat([m(x[i : i + 1]).capsules for i in range(3)])
        packed = m.primary.kernel_cache.packed
        torch.testing.assert_close(one, ref, rtol=1e-4, atol=1e-6)
        m.primary.conv.weight.mul_(1.5)
        m(x[:1])
        assert m.primary.kernel_cache.packed is not packed or packed is None
    if torch.backends.mkl.is_available():
        assert packed is not None and packed[1:] == (36, "mkl")  # 6x6 PrimaryCaps grid at 28x28


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN")
def test_batch_one_bfloat16_packs_for_onednn_where_the_cpu_can_and_agrees():
    torch.manual_seed(0)
    m = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)).eval()
    x = torch.rand(3, 1, 28, 28)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        batched = m(x).capsules.float()  # the plain bfloat16 GEMM
        one = torch.cat([m(x[i : i + 1]).capsules.float() for i in range(3)])
        packed = m.primary.kernel_cache.packed
        again = m(x).capsules.float()  # other heights through the packed weight
    if onednn_bf16_gemm():
        assert packed is not None and packed[1:] == (36, "onednn")
    else:  # an AVX2-only CPU: the plain bfloat16 GEMM, no error
        assert packed is None
    torch.testing.assert_close(one, batched, rtol=0.02, atol=2e-3)
    torch.testing.assert_close(again, batched, rtol=0.02, atol=2e-3)


@pytest.mark.parametrize("two_labels", [False, True])
def test_train_step_timer_runs_real_steps(two_labels):
    from capsviz.bench import train_step_seconds

    torch.manual_seed(0)
    m = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4))
    before = m.digits.W.detach().clone()
    dt = train_step_seconds(m, 4, torch.device("cpu"), "bf16", steps=1, two_labels=two_labels)
    assert dt > 0 and not torch.equal(before, m.digits.W)


def test_bench_measures_presets_as_capsviz_trains_them(tmp_path, capsys):
    from capsviz.bench import bench_config
    from capsviz.cli import main

    m = bench_config("matrix-small")
    assert (m.in_size, m.num_classes, m.routing_iterations) == (28, 10, 2)  # MNIST, not the smallNORB default
    assert bench_config("matrix-small", 3).routing_iterations == 3
    assert bench_config("capsnet", 1).routing_iterations == 1 and bench_config("capsnet").in_size == 28
    assert bench_config("cnn-small", 3) == PRESETS["cnn-small"]  # nothing to route
    out = tmp_path / "bench.json"
    ballast = torch.ones(2**28 // 4).add_(1)  # 256 MB in this process: the bench's child must not count it
    assert main(["bench", "--models", "cnn-smallnorb", "--steps", "1", "--json", str(out)]) == 0
    (r,) = json.loads(out.read_text())
    assert r["model"] == "cnn-smallnorb" and r["in_size"] == PRESETS["cnn-smallnorb"].in_size and r["routing_iterations"] is None
    assert (
        r["train_images_per_s"] > 0 and r["infer_images_per_s"] > 0 and r["latency_ms"] > 0 and r["peak_train_mb"] >= r["baseline_mb"] > 0
    )
    assert "cnn-smallnorb" in capsys.readouterr().out
    parent_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert r["baseline_mb"] < parent_mb - 200, (r["baseline_mb"], parent_mb)  # the child's own memory, not ours
    del ballast


def test_batches_are_chunked_for_the_cpu_cache_only():
    sizes = []

    def f(u):
        sizes.append(u.shape[0])
        return u * 2

    in_chunks(f, torch.zeros(20, 3), chunk=8)
    assert sizes == [8, 8, 4]
    sizes.clear()
    assert in_chunks(f, torch.zeros(20, 3, device="meta"), chunk=8).shape == (20, 3)
    assert sizes == [20]  # a GPU routes the whole batch: slices would only multiply kernel launches
