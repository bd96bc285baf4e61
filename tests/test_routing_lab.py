"""The routing lab's core: every routing against a hand-worked example and its oracle, models run
with another routing without being changed, and Efficient-CapsNet built, saved and trained."""

import math

import pytest
import torch

from capsviz import checkpoint as ckpt
from capsviz.config import PRESETS, preset, to_dict
from capsviz.families.efficient_capsnet.config import EfficientCapsConfig
from capsviz.models import build_model, count_parameters
from capsviz.registry import ROUTINGS as REGISTERED
from capsviz.registry import vector_routings
from capsviz.routing import (
    ROUTINGS,
    dynamic_routing_ji,
    efficient_squash,
    em_routing,
    random_couplings,
    route,
    self_attention_routing,
    squash,
    uniform_couplings,
)
from capsviz.schema import check_meta
from capsviz.train import TrainRun, train

# Two lower capsules, two classes, 2-D poses, laid out (B, J, I, D) as the routings take them:
# both lower capsules predict (1, 0) for class 1; for class 2 they disagree, (0, 1) against (0, -1).
U_HAT = torch.tensor([[[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, -1.0]]]], dtype=torch.float64)  # (1, J, I, D)


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_uniform_couplings_by_hand():
    res = uniform_couplings(U_HAT, record=True)
    # c = 1/2: s_1 = (1, 0), |s_1|^2 = 1 so v_1 = 1/2 (1, 0); s_2 = (0, 0) so v_2 = 0
    torch.testing.assert_close(res.v, torch.tensor([[[0.5, 0.0], [0.0, 0.0]]], dtype=torch.float64))
    torch.testing.assert_close(res.c, torch.full((1, 1, 2, 2), 0.5, dtype=torch.float64))


def test_dynamic_routing_two_iterations_by_hand():
    # iteration 1 is uniform (v_1 = (1/2, 0), v_2 = 0); each lower capsule then adds agreement
    # u_hat_1|i . v_1 = 1/2 to its logit for class 1 and 0 for class 2, so c_i1 = sigmoid(1/2)
    res = dynamic_routing_ji(U_HAT, 2, record=True)
    c1 = sigmoid(0.5)
    n = 2 * c1  # |s_1| = 2 c1
    torch.testing.assert_close(res.c[1, 0], torch.tensor([[c1, 1 - c1], [c1, 1 - c1]], dtype=torch.float64))
    torch.testing.assert_close(res.v, torch.tensor([[[n * n / (1 + n * n), 0.0], [0.0, 0.0]]], dtype=torch.float64))


def test_self_attention_by_hand():
    # class 1: a_1i = (1/sqrt 2)(1 + 1) = sqrt 2 for both i; class 2: a_2i = (1/sqrt 2)(1 - 1) = 0,
    # so c_i1 = sigmoid(sqrt 2); s_1 = (2 c_1 + prior, 0), s_2 = 0; v = (1 - e^-|s|) s / |s|
    prior = torch.tensor([[0.5, 0.0], [0.0, 0.0]], dtype=torch.float64)  # (J, I): b_11 = 0.5
    res = self_attention_routing(U_HAT, prior, record=True)
    c1 = sigmoid(math.sqrt(2))
    torch.testing.assert_close(res.b[0, 0], torch.tensor([[math.sqrt(2), 0.0], [math.sqrt(2), 0.0]], dtype=torch.float64))
    torch.testing.assert_close(res.c[0, 0], torch.tensor([[c1, 1 - c1], [c1, 1 - c1]], dtype=torch.float64))
    n = 2 * c1 + 0.5
    torch.testing.assert_close(res.v, torch.tensor([[[1 - math.exp(-n), 0.0], [0.0, 0.0]]], dtype=torch.float64))
    torch.testing.assert_close(res.prior, prior.T)
    without = self_attention_routing(U_HAT).v  # no prior: s_1 = (2 c_1, 0)
    torch.testing.assert_close(without[0, 0, 0].item(), 1 - math.exp(-2 * c1))


def test_random_couplings_by_hand_and_fixed_by_seed():
    res = random_couplings(U_HAT, seed=3, scale=2.0, record=True)
    r = 2.0 * torch.randn(2, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)  # (I, J), drawn once
    c = r.softmax(-1)
    torch.testing.assert_close(res.b[0, 0], r)
    torch.testing.assert_close(res.c[0, 0], c)
    s1 = c[0, 0] * U_HAT[0, 0, 0] + c[1, 0] * U_HAT[0, 0, 1]  # s_1 = sum_i c_i1 u_hat_1|i
    torch.testing.assert_close(res.v[0, 0], squash(s1))
    # zero scale: every split is uniform
    torch.testing.assert_close(random_couplings(U_HAT, scale=0.0).v, uniform_couplings(U_HAT).v)


def test_random_couplings_rows_sum_to_one_same_for_every_image_and_call():
    torch.manual_seed(0)
    u_hat = torch.randn(3, 10, 500, 4)
    a, b = random_couplings(u_hat, record=True), random_couplings(u_hat, record=True)
    torch.testing.assert_close(a.c, b.c)
    torch.testing.assert_close(a.v, b.v)
    torch.testing.assert_close(a.c.sum(-1), torch.ones(1, 3, 500))
    torch.testing.assert_close(a.c[0, 0], a.c[0, 2])  # one split per lower capsule, whatever the image
    assert (a.c[0, 0].std(-1) > 0.01).all()  # not uniform
    assert abs(float(a.b.std()) - 1.0) < 0.05  # r ~ N(0, 1) at the default scale
    assert not torch.allclose(random_couplings(u_hat, seed=1, record=True).c, a.c)
    # drawn from its own generator: the global random stream is neither read nor moved
    state = torch.get_rng_state()
    random_couplings(u_hat)
    assert torch.equal(state, torch.get_rng_state())


def test_em_routing_one_iteration_by_hand():
    # votes (*N, I, J, H): class 1 gets (1, 0) twice (variance 0), class 2 (0, 1) and (0, -1)
    votes = U_HAT.float().movedim(1, 2)  # (1, I, J, D)
    res = em_routing(votes, torch.ones(1, 2), iterations=1, final_lambda=0.3, record=True)
    torch.testing.assert_close(res.mu, torch.tensor([[[1.0, 0.0], [0.0, 0.0]]]))  # each class's mean vote
    # sigma^2 = variance + floor 1e-4; cost_j = sum_h log sigma_jh (R a sums to 1 per class):
    # cost_1 = ln 1e-4, cost_2 = (ln 1e-4 + ln 1.0001) / 2; standardised over the two classes: z = (-1, 1)
    torch.testing.assert_close(res.sigma[0, 0], torch.tensor([[1e-2, 1e-2], [1e-2, 1.0001**0.5]]))
    torch.testing.assert_close(res.a[0], torch.tensor([sigmoid(0.3), sigmoid(-0.3)]), atol=1e-5, rtol=0)
    torch.testing.assert_close(res.R[0], torch.full((1, 2, 2), 0.5))


def test_uniform_equals_dynamic_with_one_iteration():
    torch.manual_seed(0)
    u_hat = torch.randn(4, 10, 30, 16)
    one = dynamic_routing_ji(u_hat, 1, record=True)
    uni = uniform_couplings(u_hat, record=True)
    torch.testing.assert_close(uni.v, one.v)
    torch.testing.assert_close(uni.c, one.c)
    torch.testing.assert_close(uni.b, one.b)


def naive_self_attention(u_hat, prior):
    """ROUTING.md's formula, one capsule pair at a time: u_hat (B, J, I, D), prior (J, I)."""
    B, J, I, D = u_hat.shape
    v = torch.zeros(B, J, D, dtype=u_hat.dtype)
    for n in range(B):
        a = [[sum(float(u_hat[n, j, i] @ u_hat[n, j, k]) for k in range(I)) / math.sqrt(D) for i in range(I)] for j in range(J)]
        c = [[math.exp(a[j][i]) / sum(math.exp(a[m][i]) for m in range(J)) for i in range(I)] for j in range(J)]
        for j in range(J):
            s = sum((c[j][i] + float(prior[j, i])) * u_hat[n, j, i] for i in range(I))
            norm = float(s.norm())
            v[n, j] = (1 - math.exp(-norm)) * s / norm
    return v


def test_self_attention_equals_naive_loop():
    torch.manual_seed(0)
    u_hat = 0.3 * torch.randn(2, 4, 6, 5, dtype=torch.float64)
    prior = 0.1 * torch.randn(4, 6, dtype=torch.float64)
    torch.testing.assert_close(self_attention_routing(u_hat, prior).v, naive_self_attention(u_hat, prior))


def test_efficient_squash_bounds_and_zero_gradient():
    s = torch.randn(50, 8) * torch.logspace(-3, 2, 50).unsqueeze(1)
    v = efficient_squash(s)
    torch.testing.assert_close(v.norm(dim=-1), 1 - torch.exp(-s.norm(dim=-1)), atol=1e-6, rtol=1e-5)
    z = torch.zeros(2, 8, requires_grad=True)
    efficient_squash(z).sum().backward()
    assert torch.isfinite(z.grad).all()


@pytest.mark.parametrize("name", ROUTINGS)
def test_every_routing_traces_as_dynamic_routing_does(name):
    torch.manual_seed(0)
    u_hat = torch.randn(2, 10, 12, 16)
    res = route(name, u_hat, iterations=3, record=True)
    T = 3 if REGISTERED[name].iterative else 1
    assert res.c.shape == (T, 2, 12, 10) and res.b.shape == (T, 2, 12, 10) and res.v_trace.shape == (T, 2, 10, 16)
    torch.testing.assert_close(res.c.sum(-1), torch.ones(T, 2, 12))
    torch.testing.assert_close(route(name, u_hat, iterations=3).v, res.v)
    assert vector_routings() == ROUTINGS
    with pytest.raises(ValueError, match="unknown routing"):
        route("telepathy", u_hat)


def snapshot(model):
    """Everything a call could change: weights and buffers, plain attributes, the training flag."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    plain = {k: v for k, v in vars(model).items() if isinstance(v, int | float | str | bool | tuple) or v is None}
    return state, plain, model.config, [m.training for m in model.modules()]


@pytest.mark.parametrize("name", ["capsnet-small", "efficient-capsnet"])
def test_running_with_another_routing_leaves_the_model_unchanged(name):
    torch.manual_seed(0)
    model = build_model(preset(name)).eval()
    x = torch.rand(3, 1, 28, 28)
    with torch.no_grad():
        before, was = model(x), snapshot(model)
        others = {r: model(x, routing=r, iterations=2) for r in ROUTINGS}
        traced = {r: model.trace(x, routing=r) for r in ROUTINGS}
        after, now = model(x), snapshot(model)
    torch.testing.assert_close(after.scores, before.scores, rtol=0, atol=0)
    torch.testing.assert_close(after.reconstruction, before.reconstruction, rtol=0, atol=0)
    assert was[1:] == now[1:] and was[0].keys() == now[0].keys()
    assert all(torch.equal(was[0][k], now[0][k]) for k in was[0])
    own = model.config.couplings if name == "capsnet-small" else "self-attention"
    for r in ROUTINGS:
        assert others[r].scores.shape == (3, 10) and torch.isfinite(others[r].scores).all()
        assert traced[r].trace.c.shape[1:] == (3, model.num_primary, 10)
        if r != own:
            assert not torch.allclose(others[r].scores, before.scores)
    if own != "dynamic":  # (the dynamic runs above took 2 iterations, not the configured 3)
        torch.testing.assert_close(others[own].scores, before.scores)


def test_capsnet_trained_with_a_baseline_routes_with_it_by_default():
    torch.manual_seed(0)
    model = build_model(preset("capsnet-small", couplings="uniform")).eval()
    x = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(model(x).scores, model(x, routing="dynamic", iterations=1).scores)
        assert model.trace(x).trace.c.shape[0] == 1
    meta = {"config": to_dict(model.config), "weights_sha256": "0" * 64, "run": {"couplings": "random"}}
    check_meta(meta)
    with pytest.raises(Exception, match="couplings"):
        check_meta(dict(meta, config=dict(meta["config"], couplings="telepathy")))


def test_efficient_capsnet_shapes_and_parameters():
    model = build_model(PRESETS["efficient-capsnet"])
    # the paper's 161k: convolutions 130,112 + BatchNorm 576 + depthwise 10,496 + W 20,480 + prior b 160
    assert count_parameters(model) - count_parameters(model.decoder) == 161_824
    assert count_parameters(model.decoder) == 1_411_344  # the paper's "about 1.41 million"
    out = model(torch.rand(4, 1, 28, 28), torch.tensor([1, 2, 3, 4]), record=True)
    assert out.scores.shape == (4, 10) and out.capsules.shape == (4, 10, 16) and out.reconstruction.shape == (4, 28, 28)
    assert out.trace.c.shape == (1, 4, 16, 10) and out.trace.prior.shape == (16, 10)
    assert ((out.scores >= 0) & (out.scores < 1)).all()
    assert out.layer_traces["digitcaps"] is out.trace
    with pytest.raises(ValueError, match="channels"):
        build_model(EfficientCapsConfig(primary_caps=15))


@pytest.mark.parametrize("size", [28, 32, 36, 40])
def test_efficient_capsnet_takes_every_input_size(size):
    model = build_model(preset("efficient-capsnet", in_size=size))
    assert model.primary.kernel_size == (model.config.primary_grid,) * 2  # the depthwise filter spans the whole map
    out = model(torch.rand(2, 1, size, size))
    assert out.capsules.shape == (2, 10, 16) and out.reconstruction.shape == (2, size, size)


def test_efficient_capsnet_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    model = build_model(PRESETS["efficient-capsnet"])
    model.train()
    model(torch.rand(8, 1, 28, 28))  # moves the BatchNorm running statistics off their initial values
    model.eval()
    p = tmp_path / "e.safetensors"
    ckpt.save_checkpoint(p, model, {"dataset": "mnist"})
    loaded, meta = ckpt.load_checkpoint(p)
    assert meta.family == "efficient" and meta.config == model.config and meta.parameters == count_parameters(model)
    x = torch.rand(3, 1, 28, 28)
    with torch.no_grad():
        a, b = model(x), loaded(x)
    torch.testing.assert_close(b.scores, a.scores)
    torch.testing.assert_close(b.reconstruction, a.reconstruction)


def test_efficient_capsnet_loss_falls_in_a_few_steps():
    torch.manual_seed(0)
    model = build_model(PRESETS["efficient-capsnet"])
    x, y = torch.rand(16, 1, 28, 28), torch.arange(16) % 10
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(8):
        loss = model.loss(model(x, y), y, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    # 0.392 x the mean squared error is Sabour et al.'s 0.0005 x the sum on 28 x 28 images
    rec, target = torch.rand(2, 28, 28), torch.rand(2, 28, 28)
    torch.testing.assert_close(model.reconstruction_loss(rec, target), 0.392 * ((rec - target) ** 2).mean())


@pytest.mark.parametrize("model,couplings", [("efficient-capsnet", None), ("capsnet-small", "random")])
def test_training_runs_save_and_load(model, couplings, synthetic_data, tmp_path):
    run = TrainRun(
        model=model, epochs=1, batch_size=8, train_limit=16, test_limit=16, device="cpu", couplings=couplings, routing_iterations=2
    )
    meta = train(run, tmp_path / "m.safetensors")
    loaded, _ = ckpt.load_checkpoint(tmp_path / "m.safetensors")
    assert meta.complete and meta.run["couplings"] == couplings
    if couplings:
        assert loaded.config.couplings == couplings


def test_an_iteration_count_reaches_only_the_families_that_iterate():
    from capsviz.bench import bench_config
    from capsviz.train import model_config

    assert bench_config("efficient-capsnet", 5) == PRESETS["efficient-capsnet"]
    assert model_config(TrainRun(model="efficient-capsnet", routing_iterations=5)) == PRESETS["efficient-capsnet"]
    assert model_config(TrainRun(model="capsnet-small", routing_iterations=5)).routing_iterations == 5


def test_another_routing_changes_the_couplings_alone():
    torch.manual_seed(0)
    capsnet, efficient = build_model(preset("capsnet-small")).eval(), build_model(PRESETS["efficient-capsnet"]).eval()
    x = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        u_hat = capsnet.predictions(x)
        torch.testing.assert_close(capsnet(x, routing="self-attention").capsules, self_attention_routing(u_hat, squash=squash).v)
        u_hat = efficient.predictions(x)
        torch.testing.assert_close(efficient(x, routing="uniform").capsules, uniform_couplings(u_hat, squash=efficient_squash).v)
        torch.testing.assert_close(efficient(x).capsules, self_attention_routing(u_hat, efficient.b).v)


def test_evaluate_runs_a_model_with_another_routing(synthetic_data):
    from capsviz.data import load_split
    from capsviz.train import evaluate

    torch.manual_seed(0)
    model = build_model(preset("capsnet-small"))
    data = load_split("mnist", "test")
    own, uniform = evaluate(model, "mnist", data, limit=32), evaluate(model, "mnist", data, limit=32, routing="uniform")
    assert uniform["how"].endswith("run with uniform routing") and "routing" not in own["how"]
    assert uniform["n_test"] == own["n_test"] == 32
    one = evaluate(model, "mnist", data, limit=32, routing="dynamic", iterations=1)
    assert one["test_error"] == uniform["test_error"] and one["how"].endswith("run with dynamic routing, 1 routing iteration")


def test_coupling_summary_of_a_model_run_with_each_routing():
    from capsviz.analysis.routing import coupling_summary

    torch.manual_seed(0)
    images = torch.rand(3, 28, 28)
    for name in ("capsnet-small", "efficient-capsnet"):
        model = build_model(preset(name)).eval()
        with torch.no_grad():
            uniform = coupling_summary(model, images, routing="uniform")
            dynamic = coupling_summary(model, images, 3, routing="dynamic")
            attention = coupling_summary(model, images, routing="self-attention")
        assert uniform["entropy"] == pytest.approx([math.log(10)]) and uniform["coupling_to_prediction"] == pytest.approx([0.1])
        assert len(dynamic["entropy"]) == 3 and dynamic["entropy"][0] == pytest.approx(math.log(10))
        assert len(attention["entropy"]) == 1 and attention["entropy"][0] < math.log(10)


def test_the_reproduction_table_takes_an_efficient_capsnet_checkpoint(tmp_path):
    from capsviz.analysis.reproduction import paper_error, table1

    p = tmp_path / "e.safetensors"
    ckpt.save_checkpoint(p, build_model(PRESETS["efficient-capsnet"]), {"dataset": "mnist", "metrics": {"test_error": 0.5}})
    meta = ckpt.read_meta(p)
    assert paper_error(meta) == 0.26  # Mazzia et al.'s MNIST test error (ROUTING.md)
    table1([(p.name, meta)])


def test_the_glossary_explains_the_lab_routings():
    from capsviz import glossary

    for key in ("uniform", "random_couplings", "self_attention"):
        assert len(glossary.term(key).explanation) > 40


def test_kernels_sit_below_the_routing_module():
    """The routing module calls the kernels, never the reverse: no kernel module imports it."""
    import ast
    from pathlib import Path

    import capsviz.kernels

    for path in Path(capsviz.kernels.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import | ast.ImportFrom) else []
            module = node.module if isinstance(node, ast.ImportFrom) else ""
            assert "capsviz.routing" not in names and module != "capsviz.routing", path
            assert not (module == "capsviz" and "routing" in names), path
