"""Fast paths of the dynamic-routing CapsNet: DigitCaps' predictions as one small matmul per
lower capsule, and routing by agreement with its unrolled derivative written out by hand. Below
`capsviz.routing`, which hands the hand-written backward its own iterations and squash."""

from __future__ import annotations

import torch

from capsviz.kernels import policy


class VoteWeights:
    """DigitCaps' W (I, J, D, K) laid out (I, K, J*D) for the batched matmul. At inference the
    layout (and the cast under autocast) is made once per weight version, not per call: at
    batch 1 that copy of the weights took as long as the matmul itself. One immutable
    (key, layout) entry, replaced whole, so sessions sharing a cached model never read a key
    beside another version's layout."""

    def __init__(self):
        self.entry: tuple | None = None  # (key, layout)

    def get(self, W: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        I, J, D, K = W.shape
        if torch.is_grad_enabled():
            return W.permute(0, 3, 1, 2).reshape(I, K, J * D)  # (I, K, J*D)
        key = (W._version, W.data_ptr(), dtype)
        entry = self.entry
        if entry is None or entry[0] != key:
            entry = (key, W.detach().permute(0, 3, 1, 2).reshape(I, K, J * D).to(dtype).contiguous())  # (I, K, J*D)
            self.entry = entry
        return entry[1]


def digit_predictions(u: torch.Tensor, W: torch.Tensor, cache: VoteWeights) -> torch.Tensor:
    """u (B, I, K), W (I, J, D, K) -> u_hat (B, J, I, D), by one small matmul per capsule i."""
    I, J, D, K = W.shape
    B = u.shape[0]
    w = cache.get(W, policy.compute_dtype(W))  # (I, K, J*D)
    u_hat = torch.bmm(u.transpose(0, 1).to(w.dtype), w)  # (I, B, J*D)
    return u_hat.view(I, B, J, D).permute(1, 2, 0, 3).contiguous()  # (B, J, I, D)


def routing_hand_backward(u_hat: torch.Tensor, iterations: int, steps, squash) -> torch.Tensor:
    """v (B, J, D) of the routing iterations `steps` (`capsviz.routing.procedure_1`, squashing with
    `squash`) on u_hat (B, J, I, D), whose
    gradient comes from `DynamicRouting.backward`: the same unrolled derivative as autograd's,
    in 2(T-1) reads of u_hat and one write of its gradient instead of autograd's many small
    matrix products and accumulations."""
    return DynamicRouting.apply(u_hat, iterations, steps, squash)


class DynamicRouting(torch.autograd.Function):
    """Routing by agreement on u_hat (B, J, I, D) -> v (B, J, D), with the unrolled iterations'
    derivative written out. Forward, for t = 0..T-1: c_t = softmax_j(b_t), s_t = sum_i c_t u,
    v_t = squash(s_t), b_{t+1} = b_t + a_t with a_t = u . v_t. Backward, from t = T-1 down:
    g_v_t = sum_i g_a_t u (g_a_t = g_b_{t+1}; the output's gradient at T-1), g_s_t through squash,
    g_c_t = u . g_s_t, g_b_t = g_b_{t+1} + softmax'(c_t) g_c_t (b_0 is a constant, so t = 0 needs
    no g_c), and g_u = sum_t c_t (x) g_s_t + sum_{t<T-1} g_a_t (x) v_t as one batched product."""

    @staticmethod
    def forward(ctx, u_hat: torch.Tensor, iterations: int, steps, squash) -> torch.Tensor:
        _, cs, ss, vs, _ = zip(*steps(u_hat, iterations), strict=True)
        ctx.save_for_backward(u_hat, *cs, *ss, *vs)
        ctx.iterations, ctx.squash = iterations, squash
        return vs[-1]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_out: torch.Tensor):
        T = ctx.iterations
        u_hat, *saved = ctx.saved_tensors  # read once: a checkpointed slice unpacks them only once
        cs, ss, vs = saved[:T], saved[T : 2 * T], saved[2 * T :]
        left, right = [], []  # g_u = sum over k of left_k (x) right_k
        g_b = None  # g_b_{t+1}
        for t in reversed(range(T)):
            if t == T - 1:
                g_v = g_out
            else:
                g_v = (g_b.unsqueeze(-2) @ u_hat).squeeze(-2)  # (B, J, D) through a_t = u . v_t
                left.append(g_b)
                right.append(vs[t])
            with torch.enable_grad():
                s = ss[t].detach().requires_grad_()
                (g_s,) = torch.autograd.grad(ctx.squash(s), s, g_v)
            left.append(cs[t])
            right.append(g_s)
            if t > 0:
                g_c = (g_s.unsqueeze(-2) @ u_hat.transpose(-1, -2)).squeeze(-2)  # (B, J, I): u_hat . g_s
                c = cs[t]
                g_bt = c * (g_c - (c * g_c).sum(dim=1, keepdim=True))
                g_b = g_bt if g_b is None else g_b + g_bt
        g_u = torch.stack(left, dim=-1) @ torch.stack(right, dim=-2)  # (B, J, I, K) @ (B, J, K, D)
        return g_u, None, None, None
