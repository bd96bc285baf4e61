"""Fast paths of EM routing for matrix capsules: the native kernel, ConvCaps' centred vote GEMM,
and the torch.compile'd EM core. Below `capsviz.routing`: the layers hand these the schedule and
floor of the paper's algorithm, which lives there."""

from __future__ import annotations

import functools

import torch

from capsviz.kernels import native, policy


def core(em_steps):
    """The EM iterations `em_steps`, torch.compile'd while `policy.compiled_em()` is on."""
    return _compiled(em_steps) if policy.compiled_em() else em_steps


@functools.cache
def _compiled(fn):
    return torch.compile(fn, dynamic=False)


def conv_caps(pose, a, W, beta_u, beta_a, lower_index, lambdas, var_floor) -> tuple[torch.Tensor, torch.Tensor]:
    """ConvCaps' routing by the native kernel, which gathers each receptive field's slots itself:
    pose (B, H, W, T, 16), a (B, H, W, T), W (K*K*T, J, 4, 4), lower_index (P, K*K*T) -> a (B, P, J)
    and mu (B, P, J, 16) in pose's dtype."""
    B, H, Wd, T, _ = pose.shape
    a_out, mu = native.em_routing(
        pose.reshape(B, H * Wd * T, 16), W, a.reshape(B, H * Wd * T), beta_u, beta_a, lower_index, lambdas, var_floor
    )
    return a_out.to(pose.dtype), mu.to(pose.dtype)


def centred_votes(p, W, B, P, I, J):
    """Votes (B, P, J, I, 16) for `capsviz.routing.em_centred`, already centred on each upper capsule's
    mean vote and scaled, made by one batched GEMM per receptive-field slot that writes them
    centred: no passes over the vote tensor before routing but one transposing copy.

    Each slot's 4x4 transform acts as a (16, J*16) block matrix on the flattened pose, so one
    GEMM gives a slot's votes for every upper capsule. The scale is a bound, not the exact
    largest vote: |vote - centre| <= 2 * 4 * max|pose| * max|W| per image."""
    N = B * P
    poses = p.permute(5, 6, 3, 0, 1, 2, 4).reshape(I, B, P, 16)  # (I, B, P, 16) in (ky, kx, t) slot order
    eye = torch.eye(4, dtype=p.dtype, device=p.device)
    Wb = torch.einsum("ab,ijyz->iayjbz", eye, W.float()).reshape(I, 16, J * 16)  # (I, 16, J*16): row (x, y), col (j, x, z)
    bound = poses.detach().abs().amax(dim=(0, 2, 3)) * W.detach().abs().max()  # (B,)
    scale = (8 * bound).clamp_min(1.0).view(B, 1, 1, 1)
    poses = (poses / scale.view(1, B, 1, 1)).view(I, N, 16)  # (I, N, 16)
    # a constant offset, as in em_routing: the result does not depend on it in exact arithmetic
    centre = (poses.detach().transpose(0, 1).reshape(N, I * 16) @ Wb.detach().reshape(I * 16, J * 16)) / I  # (N, J*16)
    V = torch.baddbmm(-centre.unsqueeze(0), poses, Wb)  # (I, N, J*16) centred, scaled
    Vc = V.view(I, B, P, J, 16).permute(1, 2, 3, 0, 4).contiguous()  # (B, P, J, I, 16)
    return Vc, centre.view(B, P, J, 16) * scale, scale


def class_caps(pose, a, W, beta_u, beta_a, coords, lambdas, var_floor) -> tuple[torch.Tensor, torch.Tensor]:
    """The class capsules' routing by the native kernel: pose (B, H, W, T, 16), a (B, H, W, T),
    W (T, J, 4, 4), coords (H, W, 16) or None -> a (B, J), mu (B, J, 16). Every (position, type)
    is one slot of a single routing group, and its own lower capsule."""
    B, H, Wd, T, _ = pose.shape
    I = H * Wd * T
    slots = torch.arange(I, device=pose.device)
    offset = None if coords is None else coords.view(H, Wd, 1, 16).expand(H, Wd, T, 16).reshape(I, 16)  # (I, 16)
    a_out, mu = native.em_routing(
        pose.reshape(B, I, 16), W[slots % T], a.reshape(B, I), beta_u, beta_a, slots.view(1, I), lambdas, var_floor, offset
    )
    return a_out.view(B, -1).to(pose.dtype), mu.view(B, -1, 16).to(pose.dtype)
