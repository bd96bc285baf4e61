"""Building blocks: vector capsules and matrix capsules.

Each layer computes its paper's formulas in plain PyTorch and asks `capsviz.kernels.policy` once
whether a faster path (capsviz.kernels) may run instead; the results agree (tests/test_kernels*.py)."""

from __future__ import annotations

import torch
import torch.nn as nn

from capsviz.kernels import em as em_kernel
from capsviz.kernels import policy
from capsviz.kernels.conv import WeightCache, conv2d_nhwc
from capsviz.kernels.dynamic import VoteWeights, digit_predictions
from capsviz.routing import VAR_FLOOR, EMRoutingResult, em_centred, em_routing, lambda_schedule, squash


class PrimaryCaps(nn.Module):
    """Conv layer whose output channels are grouped into `types` capsules of `dim` each, squashed.

    Capsule index i = (row * grid + col) * types + type, so traces reshape to (grid, grid, types).
    """

    def __init__(self, *, in_channels: int, types: int, dim: int, kernel: int = 9, stride: int = 2):
        super().__init__()
        self.types, self.dim, self.stride = types, dim, stride
        self.conv = nn.Conv2d(in_channels, types * dim, kernel, stride=stride)
        self.kernel_cache = WeightCache()

    def forward(self, x_nhwc: torch.Tensor) -> torch.Tensor:
        """x (B, H, W, Cin) channels last -> u (B, I, dim)."""
        B = x_nhwc.shape[0]
        path = policy.conv_path(x_nhwc, self.conv.weight, self.stride)
        if path:  # the same convolution through the Fourier domain or one GEMM (capsviz.kernels)
            y = conv2d_nhwc(x_nhwc, self.conv.weight, self.conv.bias, self.stride, path, self.kernel_cache)  # (B, G, G, types*dim)
        else:
            y = self.conv(x_nhwc.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)  # (B, G, G, types*dim)
        u = y.reshape(B, -1, self.dim)  # (B, I, dim): the dim channels of one capsule are adjacent
        return squash(u.float())


class DigitCaps(nn.Module):
    """One dim_in x dim_out W per (primary capsule i, class j); predictions u_hat = W u."""

    def __init__(self, *, num_in: int, num_out: int, dim_in: int, dim_out: int):
        super().__init__()
        # std sqrt(3 / I), not a fixed 0.01: the first s (c = 1/J) then starts about as long as one primary capsule
        # for any I, off squash's flat |s|^2 region (capsviz.analysis.early_learning)
        self.W = nn.Parameter((3 / num_in) ** 0.5 * torch.randn(num_in, num_out, dim_out, dim_in))  # (I, J, D, K)
        self.kernel_cache = VoteWeights()

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """u (B, I, K) -> u_hat laid out (B, J, I, D) for `dynamic_routing_ji`."""
        if policy.vote_gemm(self.W):  # one small matmul per capsule i, its weight laid out once
            return digit_predictions(u, self.W, self.kernel_cache)  # (B, J, I, D)
        return torch.einsum("ijdk,bik->bjid", self.W, u.to(self.W.dtype))  # (B, J, I, D): u_hat_j|i = W_ij u_i


class PrimaryMatrixCaps(nn.Module):
    """1x1 convs: a 4x4 pose and a logistic activation per capsule type at every position."""

    def __init__(self, *, in_channels: int, types: int):
        super().__init__()
        self.types = types
        self.pose = nn.Conv2d(in_channels, types * 16, 1)
        self.act = nn.Conv2d(in_channels, types, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, _, H, W = x.shape
        pose = self.pose(x).permute(0, 2, 3, 1).reshape(B, H, W, self.types, 16)  # (B, H, W, T, 16)
        a = torch.sigmoid(self.act(x)).permute(0, 2, 3, 1)  # (B, H, W, T)
        return pose, a


def _vote_init(*shape: int) -> nn.Parameter:
    # Near-identity transforms plus noise: votes start close to the poses but differ per type.
    eye = torch.eye(4).expand(*shape[:-2], 4, 4)
    return nn.Parameter(eye + 0.5 * torch.randn(*shape))


class ConvCaps(nn.Module):
    """Convolutional capsule layer: each upper capsule gets votes from its K x K receptive field
    (one 4x4 W per kernel position and type pair) and is routed by EM."""

    def __init__(self, *, in_types: int, out_types: int, kernel: int, stride: int, iterations: int, final_lambda: float):
        super().__init__()
        self.k, self.s, self.iterations, self.final_lambda = kernel, stride, iterations, final_lambda
        self.W = _vote_init(kernel * kernel * in_types, out_types, 4, 4)
        self.beta_u = nn.Parameter(torch.zeros(out_types))
        self.beta_a = nn.Parameter(torch.zeros(out_types))
        self._index: dict = {}

    def lower_index(self, H: int, W: int, T: int, device) -> torch.Tensor:
        """(P, K*K*T): which lower capsule (flat over H, W, T) sits in each receptive-field slot."""
        key = (H, W, T, str(device))
        index = self._index.get(key)
        if index is None:  # made whole, then stored by one dict operation: safe for sessions sharing the model
            ids = torch.arange(H * W * T, device=device).view(H, W, T)
            patches = ids.unfold(0, self.k, self.s).unfold(1, self.k, self.s)  # (Ho, Wo, T, K, K)
            index = self._index.setdefault(key, patches.permute(0, 1, 3, 4, 2).reshape(-1, self.k * self.k * T))  # (P, K*K*T)
        return index

    def forward(self, pose, a, record: bool = False, iterations: int | None = None):
        """pose (B, H, W, T, 16), a (B, H, W, T) -> mu (B, Ho, Wo, J, 16), a (B, Ho, Wo, J) and
        the routing result. `iterations` overrides the layer's own for this call only: a model
        cached across sessions is never changed by one request."""
        B, H, W, T, _ = pose.shape
        it = self.iterations if iterations is None else iterations
        k, s = self.k, self.s
        Ho, Wo = conv_out(H, k, s), conv_out(W, k, s)
        P, I, J = Ho * Wo, k * k * T, self.W.shape[1]
        lower = self.lower_index(H, W, T, pose.device)  # (P, I)
        fast = not record and policy.centred_em(pose)
        if fast and policy.native_em(pose):  # the native kernel (capsviz.kernels)
            lambdas = lambda_schedule(it, self.final_lambda)
            res = EMRoutingResult(*em_kernel.conv_caps(pose, a, self.W, self.beta_u, self.beta_a, lower, lambdas, VAR_FLOOR))
        else:
            p = pose.unfold(1, k, s).unfold(2, k, s)  # (B, Ho, Wo, T, 16, K, K)
            a_p = a.unfold(1, k, s).unfold(2, k, s).permute(0, 1, 2, 4, 5, 3).reshape(B, P, I)  # (B, P, I)
            if fast:  # votes made centred by one GEMM per slot (capsviz.kernels)
                with torch.autocast(pose.device.type, enabled=False):
                    Vc, centre, scale = em_kernel.centred_votes(p.float(), self.W, B, P, I, J)
                    res = em_centred(
                        Vc, centre, scale, a_p.float(), it, self.beta_u, self.beta_a, self.final_lambda, VAR_FLOOR, lower, H * W * T, False
                    )
                res.a, res.mu = res.a.to(pose.dtype), res.mu.to(pose.dtype)
            else:
                p = p.permute(0, 1, 2, 5, 6, 3, 4).reshape(B, P, I, 4, 4)  # (B, P, I, 4, 4) in (ky, kx, t) slot order
                votes = torch.einsum("bpixy,ijyz->bpijxz", p, self.W).flatten(-2)  # (B, P, I, J, 16): pose times W_ij
                route = dict(final_lambda=self.final_lambda, lower_index=lower, num_lower=H * W * T, record=record)
                res = em_routing(votes, a_p, it, self.beta_u, self.beta_a, **route)
        return res.mu.view(B, Ho, Wo, J, 16), res.a.view(B, Ho, Wo, J), res


class ClassCaps(nn.Module):
    """Class capsules: W shared across positions per (type, class); coordinate addition adds the
    scaled (row, col) of each capsule's receptive-field centre to entries (0, 3) and (1, 3) of
    its vote."""

    def __init__(self, *, in_types: int, num_classes: int, iterations: int, final_lambda: float, coords: torch.Tensor | None):
        super().__init__()
        self.iterations, self.final_lambda = iterations, final_lambda
        self.W = _vote_init(in_types, num_classes, 4, 4)
        self.beta_u = nn.Parameter(torch.zeros(num_classes))
        self.beta_a = nn.Parameter(torch.zeros(num_classes))
        self.register_buffer("coords", coords, persistent=False)  # (H, W, 16) or None

    def forward(self, pose, a, record: bool = False, iterations: int | None = None):
        """`iterations` overrides the layer's own for this call only (see ConvCaps.forward)."""
        B, H, W, T, _ = pose.shape
        it = self.iterations if iterations is None else iterations
        if not record and policy.native_em(pose):  # the native kernel (capsviz.kernels)
            lambdas = lambda_schedule(it, self.final_lambda)
            return EMRoutingResult(*em_kernel.class_caps(pose, a, self.W, self.beta_u, self.beta_a, self.coords, lambdas, VAR_FLOOR))
        votes = torch.einsum("bhwtxy,tjyz->bhwtjxz", pose.view(B, H, W, T, 4, 4), self.W).flatten(-2)  # (B, H, W, T, J, 16)
        if self.coords is not None:
            votes = votes + self.coords.view(H, W, 1, 1, 16)
        res = em_routing(
            votes.reshape(B, H * W * T, -1, 16),  # (B, I, J, 16)
            a.reshape(B, H * W * T),  # (B, I)
            it,
            self.beta_u,
            self.beta_a,
            final_lambda=self.final_lambda,
            record=record,
        )
        return res


def receptive_centres(in_size: int, layers: list[tuple[int, int]]) -> torch.Tensor:
    """Centre (in input pixels, scaled to [0, 1]) of each unit of the last of `layers` (kernel, stride)."""
    n = in_size
    for k, s in layers:
        n = (n - k) // s + 1
    pos = torch.arange(n, dtype=torch.float32)
    for k, s in reversed(layers):
        pos = pos * s + (k - 1) / 2
    return (pos + 0.5) / in_size


def coordinate_grid(centres: torch.Tensor) -> torch.Tensor:
    """(H, W, 16) addend: row centre at entry (0, 3), column centre at (1, 3) of a 4x4 vote."""
    n = len(centres)
    g = torch.zeros(n, n, 16)
    g[:, :, 3] = centres.view(n, 1)
    g[:, :, 7] = centres.view(1, n)
    return g


def conv_out(n: int, k: int, s: int) -> int:
    out = (n - k) // s + 1
    if out < 1:
        raise ValueError(f"input of {n} pixels is too small for kernel {k} stride {s}")
    return out
