"""Routing invariants, and the oracle: vectorised routing == a naive loop from the pseudocode."""

import math

import pytest
import torch

from capsviz.routing import dynamic_routing, em_procedure_1, em_routing, squash


def test_squash_bounds_direction_and_zero_gradient():
    torch.manual_seed(0)
    s = torch.randn(100, 16) * torch.logspace(-3, 3, 100).unsqueeze(1)
    v = squash(s)
    n = v.norm(dim=-1)
    assert (n < 1).all() and (n >= 0).all()
    torch.testing.assert_close(torch.nn.functional.normalize(v, dim=-1), torch.nn.functional.normalize(s, dim=-1))
    assert n[:3].max() < 1e-4 and n[-5:].min() > 0.99  # short -> ~0, long -> just under 1
    z = torch.zeros(3, 8, requires_grad=True)
    squash(z).sum().backward()
    assert torch.isfinite(z.grad).all()


def naive_dynamic(u_hat, r):
    """Procedure 1 of Sabour et al., one capsule pair at a time."""
    B, I, J, D = u_hat.shape
    v_all = torch.zeros(B, J, D, dtype=u_hat.dtype)
    for n in range(B):
        b = [[0.0] * J for _ in range(I)]
        for _ in range(r):
            c = [[math.exp(b[i][j]) / sum(math.exp(x) for x in b[i]) for j in range(J)] for i in range(I)]
            v = []
            for j in range(J):
                s = sum(c[i][j] * u_hat[n, i, j] for i in range(I))
                sq = float((s * s).sum())
                v.append(sq / (1 + sq) * s / math.sqrt(sq + 1e-8))
            for i in range(I):
                for j in range(J):
                    b[i][j] += float(u_hat[n, i, j] @ v[j])
        v_all[n] = torch.stack(v)
    return v_all


@pytest.mark.parametrize("r", [1, 3, 5])
def test_dynamic_routing_equals_naive_loop(r):
    torch.manual_seed(r)
    u_hat = torch.randn(2, 7, 4, 5, dtype=torch.float64)
    torch.testing.assert_close(dynamic_routing(u_hat, r).v, naive_dynamic(u_hat, r))


def test_dynamic_routing_trace_invariants():
    torch.manual_seed(0)
    u_hat = torch.randn(3, 20, 10, 16)
    res = dynamic_routing(u_hat, 4, record=True)
    T, B, I, J = res.c.shape
    assert (T, B, I, J) == (4, 3, 20, 10) and res.v_trace.shape == (4, 3, 10, 16) and res.b_change.shape == (4, 3)
    torch.testing.assert_close(res.c.sum(-1), torch.ones(T, B, I))
    torch.testing.assert_close(res.c[0], torch.full((B, I, J), 0.1))
    assert (res.b[0] == 0).all()
    torch.testing.assert_close(res.v_trace[-1], res.v)
    # b_change[t] is the mean |b_{t+1} - b_t|
    torch.testing.assert_close(res.b_change[:-1], (res.b[1:] - res.b[:-1]).abs().mean(dim=(2, 3)))
    torch.testing.assert_close(dynamic_routing(u_hat, 4).v, res.v)


def autograd_dynamic(u_hat, r, detach_agreement=False):
    """Procedure 1 as plain tensor ops, differentiated by autograd: the reference for the
    hand-written backward (and, with the agreement detached, a routing whose logits carry no gradient)."""
    b = torch.zeros(u_hat.shape[:3], dtype=u_hat.dtype)
    for t in range(r):
        c = b.softmax(-1)
        v = squash(torch.einsum("bij,bijd->bjd", c, u_hat))
        if t < r - 1:
            a = torch.einsum("bijd,bjd->bij", u_hat, v)
            b = b + (a.detach() if detach_agreement else a)
    return v


def test_dynamic_routing_gradients_flow_through_all_iterations():
    u_hat = torch.randn(2, 6, 3, 4, requires_grad=True)
    dynamic_routing(u_hat, 3).v.pow(2).sum().backward()
    g3 = u_hat.grad.clone()
    u_hat.grad = None
    # with b detached between iterations the gradient would differ: the agreement path counts
    u2 = u_hat.detach().clone().requires_grad_()
    autograd_dynamic(u2, 3, detach_agreement=True).pow(2).sum().backward()
    assert not torch.allclose(g3, u2.grad)


@pytest.mark.parametrize("T", [1, 2, 3])
def test_em_routing_equals_the_papers_procedure(T):
    """The fast path (centred, scaled, batched matmuls) against capsviz.routing.em_procedure_1, EM
    routing written in the paper's symbols; beta_u per capsule, votes far from 0 (the centring)."""
    torch.manual_seed(T)
    V = torch.randn(2, 12, 3, 16, dtype=torch.float64) * 0.5 + 3.0
    a_in = torch.rand(2, 12, dtype=torch.float64)
    beta_u = torch.tensor([0.3, -0.1, 0.5], dtype=torch.float64)
    res = em_routing(V, a_in, T, beta_u, -0.2, final_lambda=0.05)
    for n in range(2):
        a, mu = em_procedure_1(V[n], a_in[n], T, beta_u, -0.2, final_lambda=0.05)
        torch.testing.assert_close(res.a[n], a.to(res.a.dtype), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(res.mu[n], mu.to(res.mu.dtype), rtol=1e-4, atol=1e-4)
    if T > 1:  # the E-step moved something: the reference is not trivially the first M-step
        a1, _ = em_procedure_1(V[0], a_in[0], 1, beta_u, -0.2, final_lambda=0.05)
        assert not torch.allclose(a1, em_procedure_1(V[0], a_in[0], T, beta_u, -0.2, final_lambda=0.05)[0])


def test_em_trace_invariants():
    torch.manual_seed(0)
    res = em_routing(torch.randn(2, 30, 5, 16), torch.rand(2, 30), 3, record=True)
    assert res.R.shape == (3, 2, 30, 5) and res.mu_trace.shape == (3, 2, 5, 16) and res.sigma.shape == (3, 2, 5, 16)
    assert res.a_trace.shape == (3, 2, 5) and res.lambdas.shape == (3,)
    torch.testing.assert_close(res.R.sum(-1), torch.ones(3, 2, 30))
    torch.testing.assert_close(res.R[0], torch.full((2, 30, 5), 0.2))
    assert (res.lambdas[1:] > res.lambdas[:-1]).all()
    torch.testing.assert_close(res.a_trace[-1], res.a)
    torch.testing.assert_close(res.mu_trace[-1], res.mu)


def test_em_assigns_two_clusters_and_prefers_the_tighter_one():
    torch.manual_seed(0)
    I, H = 40, 16
    A, Bp = torch.zeros(H), torch.full((H,), 3.0)
    V = torch.randn(I, 2, H) * 5.0  # everyone's vote for the other capsule: scattered far away
    V[:20, 0] = A + 0.01 * torch.randn(20, H)  # group 1 agrees tightly on A for capsule 0
    V[20:, 1] = Bp + 0.2 * torch.randn(20, H)  # group 2 agrees loosely on B for capsule 1
    res = em_routing(V.unsqueeze(0), torch.ones(1, I), 3, record=True)
    R = res.R[-1, 0]  # (I, 2)
    assert (R[:20, 0] > 0.9).all() and (R[20:, 1] > 0.9).all()
    torch.testing.assert_close(res.mu[0, 0], A, atol=0.02, rtol=0)
    torch.testing.assert_close(res.mu[0, 1], Bp, atol=0.2, rtol=0)
    assert res.a[0, 0] > res.a[0, 1]


def _finite(res):
    return bool(
        torch.isfinite(res.a).all() and torch.isfinite(res.mu).all() and torch.isfinite(res.R).all() and torch.isfinite(res.sigma).all()
    )


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "case",
    ["zero_variance", "zero_activations", "identical_votes", "huge_votes"],
)
def test_em_never_nan_or_inf(dtype, case, device):
    torch.manual_seed(0)
    V = torch.randn(2, 24, 4, 16)
    a = torch.rand(2, 24)
    if case == "zero_variance":  # each capsule's votes collapse onto one point
        V = V[:, :1].expand(-1, 24, -1, -1).clone()
    elif case == "zero_activations":
        a = torch.zeros(2, 24)
    elif case == "identical_votes":
        V = torch.ones(2, 24, 4, 16)
    elif case == "huge_votes":
        V = V * 1e18
    V, a = V.to(device), a.to(device)
    res = em_routing(V.to(dtype), a.to(dtype), 3, 0.0, 0.0, record=True)
    assert res.a.dtype == dtype and res.a.device.type == device
    assert _finite(res), case
    V.requires_grad_()
    out = em_routing(V.to(dtype), a.to(dtype), 3)
    (out.a.float().sum() + out.mu.float().sum()).backward()
    assert torch.isfinite(V.grad).all(), case


def test_convolutional_em_normalises_each_lower_capsule_over_all_positions():
    from capsviz.layers import ConvCaps

    torch.manual_seed(0)
    layer = ConvCaps(in_types=2, out_types=3, kernel=3, stride=2, iterations=3, final_lambda=0.1)
    pose, a = torch.randn(1, 7, 7, 2, 16), torch.rand(1, 7, 7, 2)
    _, _, res = layer(pose, a, record=True)
    R = res.R[-1, 0]  # (P, Kin, J)
    idx = layer.lower_index(7, 7, 2, "cpu")  # (P, Kin)
    total = torch.zeros(7 * 7 * 2).index_add_(0, idx.flatten(), R.sum(-1).flatten())
    torch.testing.assert_close(total, torch.ones(98))
    reach = torch.bincount(idx.flatten(), minlength=98).view(7, 7, 2)
    assert reach[0, 0, 0] == 1 and reach[2, 2, 0] == 4  # a corner reaches one position, an inner one four


@CUDA
@pytest.mark.parametrize("r", [1, 3])
def test_dynamic_routing_on_cuda_matches_cpu(r):
    torch.manual_seed(0)
    u_hat = torch.randn(4, 1152, 10, 16) * 0.1
    cpu = dynamic_routing(u_hat, r, record=True)
    gpu = dynamic_routing(u_hat.cuda(), r, record=True)
    torch.testing.assert_close(gpu.v.cpu(), cpu.v, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(gpu.c.cpu(), cpu.c, rtol=1e-4, atol=1e-6)
