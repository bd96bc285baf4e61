"""Building blocks: a fast CPU convolution, vector capsules and matrix capsules."""

from __future__ import annotations

import functools

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from capsviz import fourier, native
from capsviz.routing import VAR_FLOOR, EMRoutingResult, em_centred, em_routing, lambda_schedule, squash


def in_chunks(fn, *xs: torch.Tensor, chunk: int, keep: int = 0):
    """fn over slices of the batch, small enough to keep the routing tensors in the CPU's cache.

    With gradients on, each slice after the first `keep` images is checkpointed: only its inputs
    are kept and its forward is recomputed (still in cache) during backward. Peak memory then
    grows with `keep` + `chunk`, not the batch; that matters most for EM, whose votes are ~0.8M
    floats per image. The first `keep` images keep their activations and skip the recompute.
    Off the CPU the whole batch goes at once: on a GPU slices only multiply the kernel launches
    (MultiMNIST CapsNet training, 3 images per slice: 380 images/s on an H100 at 10% utilisation;
    whole batches: ~11,000).
    """
    if xs[0].shape[0] <= chunk or xs[0].device.type != "cpu":
        return fn(*xs)
    outs, done = [], 0
    for p in zip(*(x.split(chunk) for x in xs), strict=True):
        done += p[0].shape[0]
        outs.append(checkpoint(fn, *p, use_reentrant=False) if torch.is_grad_enabled() and done > keep else fn(*p))
    if isinstance(outs[0], tuple):
        return tuple(torch.cat(o) for o in zip(*outs, strict=True))
    return torch.cat(outs)


# Bytes of patch gradients folded at once: 16 paper-config images (3 MB each). A whole batch's
# would match the saved patches in size; smaller models fold more images per slice.
FOLD_BYTES = 48 * 2**20


def im2col(x: torch.Tensor, kernel: int, stride: int) -> tuple[torch.Tensor, int, int]:
    """Contiguous NHWC x (B, H, W, C) -> patches (B*Ho*Wo, K*K*C) in (kh, kw, c) order, one copy."""
    B, H, W, C = x.shape
    Ho, Wo = (H - kernel) // stride + 1, (W - kernel) // stride + 1
    sb, sh, sw, sc = x.stride()
    patches = x.as_strided((B, Ho, Wo, kernel, kernel, C), (sb, sh * stride, sw * stride, sh, sw, sc))
    return patches.reshape(B * Ho * Wo, kernel * kernel * C), Ho, Wo


class _Im2colConv(torch.autograd.Function):
    """Valid convolution of an NHWC tensor as one GEMM over strided patches.

    oneDNN's kernels for PrimaryCaps' 9x9 stride-2 convolution onto a 6x6 grid reach about half
    of this machine's GEMM speed and leave AMX idle in bfloat16; gathering the patches through
    a strided view and doing one large matmul is 1.5x (float32) to 2.5x (bfloat16) faster.
    """

    @staticmethod
    def forward(ctx, x, w, kernel, stride):
        cols, Ho, Wo = im2col(x, kernel, stride)
        # The patches are gathered again in backward rather than kept: they are 7x the input's
        # size (380 MB for a 128-image paper-CapsNet batch), in float32 the input is the ReLU
        # output autograd keeps anyway, and the copy costs a few percent of the step.
        ctx.save_for_backward(x, w)
        ctx.geom = (kernel, stride, Ho, Wo)
        return (cols @ w.t()).view(x.shape[0], Ho, Wo, -1)  # (B, Ho, Wo, Cout)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        k, s, Ho, Wo = ctx.geom
        shape = x.shape
        g2 = g.reshape(-1, g.shape[-1])  # (B*Ho*Wo, Cout)
        gw = g2.t() @ im2col(x, k, s)[0] if ctx.needs_input_grad[1] else None
        gx = None
        if ctx.needs_input_grad[0]:
            gx = g.new_zeros(shape)
            n = max(1, FOLD_BYTES // (Ho * Wo * w.shape[1] * g.element_size()))  # images per slice
            for b0 in range(0, shape[0], n):
                gcols = (g[b0 : b0 + n].reshape(-1, g.shape[-1]) @ w).view(-1, Ho, Wo, k, k, shape[3])
                gxb = gx[b0 : b0 + n]
                for kh in range(k):  # fold: one strided add per kernel offset
                    for kw in range(k):
                        gxb[:, kh : kh + s * (Ho - 1) + 1 : s, kw : kw + s * (Wo - 1) + 1 : s] += gcols[:, :, :, kh, kw]
        return gx, gw, None, None


def conv2d_nhwc(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: int,
    gemm_weight: torch.Tensor | None = None,
    packed: tuple[torch.Tensor, int] | None = None,
) -> torch.Tensor:
    """Valid conv of NHWC `x` (B, H, W, Cin) with an nn.Conv2d-shaped weight -> (B, Ho, Wo, Cout).

    On the CPU: in float32 for batches where it pays (most training and batched inference), the
    Fourier-domain convolution of `capsviz.fourier`; otherwise the im2col GEMM. cuDNN/MPS kernels
    elsewhere. All honour autocast.
    `gemm_weight` is the weight already laid out (Cout, K*K*Cin) in the compute dtype, if cached;
    `packed` (inference only) is that weight pre-packed by `pack_gemm_weight`.
    """
    k = weight.shape[-1]
    if x.device.type != "cpu":
        y = F.conv2d(x.permute(0, 3, 1, 2), weight, bias, stride=stride)
        return y.permute(0, 2, 3, 1)
    dtype = compute_dtype(x)
    if dtype == torch.float32 and fourier.worthwhile(*x.shape, weight.shape[0], k, stride):
        with torch.autocast("cpu", enabled=False):
            y = fourier.conv2d(x.float().contiguous(), weight.float(), stride)
            return y if bias is None else y + bias.float()
    w = gemm_weight if gemm_weight is not None else gemm_layout(weight, dtype)
    with torch.autocast("cpu", enabled=False):
        if packed is not None and not torch.is_grad_enabled():
            cols, Ho, Wo = im2col(x.to(dtype).contiguous(), k, stride)
            # Other heights than the packed one still work (MKL falls back to an ordinary linear).
            y = _packed_matmul(packed[2], cols, packed[0], w, packed[1]).view(x.shape[0], Ho, Wo, -1)
        else:
            y = _Im2colConv.apply(x.to(dtype).contiguous(), w, k, stride)
        if bias is not None:
            y = y + bias.to(dtype)
    return y


# PyTorch's private ops for pre-packed GEMM weights: not part of its public API, so they may be
# missing or change signature in another torch version. Each is looked up by name here and used
# only where `mkl_packed_gemm` / `onednn_bf16_gemm` found it working; otherwise the public
# im2col GEMM runs (tests/test_private_ops.py makes each unavailable in turn).
PRIVATE_OPS = {
    "mkl_reorder": ("mkl", "_mkl_reorder_linear_weight"),
    "mkl_linear": ("mkl", "_mkl_linear"),
    "onednn_reorder": ("mkldnn", "_reorder_linear_weight"),
    "onednn_linear": ("mkldnn", "_linear_pointwise"),
}


def private_op(name: str):
    """torch.ops.<namespace>.<op> for a PRIVATE_OPS entry, or None where this torch lacks it."""
    namespace, op = PRIVATE_OPS[name]
    try:
        return getattr(getattr(torch.ops, namespace), op)
    except (AttributeError, RuntimeError):  # torch raises either for an unknown op, by version
        return None


def _packed_matmul(kind: str, cols: torch.Tensor, packed: torch.Tensor, w: torch.Tensor, rows: int) -> torch.Tensor:
    if kind == "mkl":
        return private_op("mkl_linear")(cols, packed, w, None, rows)
    return private_op("onednn_linear")(cols, packed, None, "none", [], "")


def _packing_works(kind: str, dtype: torch.dtype) -> bool:
    """Whether `kind`'s ops exist here and give a small product's right answer: a changed
    signature or an unsupported CPU raises or differs, and the plain GEMM serves instead."""
    reorder = private_op(f"{kind}_reorder")
    if reorder is None or private_op(f"{kind}_linear") is None:
        return False
    x, w = torch.rand(4, 16, dtype=dtype), torch.rand(8, 16, dtype=dtype)
    try:
        got = _packed_matmul(kind, x, reorder(w, 4), w, 4)
    except (RuntimeError, TypeError, ValueError):
        return False
    return got.shape == (4, 8) and torch.allclose(got.float(), (x @ w.t()).float(), rtol=0.02, atol=0.02)


@functools.cache
def mkl_packed_gemm() -> bool:
    """Whether MKL pre-packs float32 GEMM weights in this torch build."""
    return torch.backends.mkl.is_available() and _packing_works("mkl", torch.float32)


@functools.cache
def onednn_bf16_gemm() -> bool:
    """Whether oneDNN packs bfloat16 GEMM weights on this CPU: it needs AVX-512 (BW, VL, DQ) or
    AVX-NE-CONVERT and raises elsewhere (an AVX2-only EPYC, say), where the plain GEMM serves."""
    return torch.backends.mkldnn.is_available() and _packing_works("onednn", torch.bfloat16)


def pack_gemm_weight(w: torch.Tensor, rows: int) -> tuple[torch.Tensor, int, str] | None:
    """A GEMM weight (N, K) pre-packed for (rows, K) @ (K, N) products: by MKL in float32, by
    oneDNN in bfloat16 (AMX); None where neither applies. For the paper's PrimaryCaps at batch 1
    (36 x 20736 @ 20736 x 256) on this CPU: float32 ~2.5 ms instead of ~3.6 (the packed copy is
    ~3x the weight's size), bfloat16 ~0.65-1.1 ms instead of ~1.0-1.6."""
    if w.dtype == torch.float32 and mkl_packed_gemm():
        return private_op("mkl_reorder")(w, rows), rows, "mkl"
    if w.dtype == torch.bfloat16 and onednn_bf16_gemm():
        return private_op("onednn_reorder")(w, rows), rows, "onednn"
    return None


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype matmuls on x's device compute in: autocast's when it is on, else x's own."""
    kind = x.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else x.dtype


def gemm_layout(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(Cout, Cin, K, K) -> (Cout, K*K*Cin) in (kh, kw, c) order, the im2col GEMM's layout."""
    return weight.permute(0, 2, 3, 1).reshape(weight.shape[0], -1).to(dtype)


class PrimaryCaps(nn.Module):
    """Conv layer whose output channels are grouped into `types` capsules of `dim` each, squashed.

    Capsule index i = (row * grid + col) * types + type, so traces reshape to (grid, grid, types).
    """

    def __init__(self, *, in_channels: int, types: int, dim: int, kernel: int = 9, stride: int = 2):
        super().__init__()
        self.types, self.dim, self.stride = types, dim, stride
        self.conv = nn.Conv2d(in_channels, types * dim, kernel, stride=stride)
        self._gemm_cache = None

    def forward(self, x_nhwc: torch.Tensor) -> torch.Tensor:
        w = packed = None
        if x_nhwc.device.type == "cpu" and not torch.is_grad_enabled():
            # Inference: lay the 5.3M weights out for the GEMM once, not per call (6 ms at batch 1),
            # and for a single image also pack them for MKL / oneDNN (the first batch-1 call pays for it).
            # The version counter changes with every in-place update, so training never sees stale weights.
            dtype = compute_dtype(x_nhwc)
            key = (self.conv.weight._version, dtype, self.conv.weight.data_ptr())
            if self._gemm_cache is None or self._gemm_cache[0] != key:
                self._gemm_cache = (key, gemm_layout(self.conv.weight.detach(), dtype), None)
            _, w, packed = self._gemm_cache
            if x_nhwc.shape[0] == 1 and packed is None:
                H = x_nhwc.shape[1]
                packed = pack_gemm_weight(w, ((H - self.conv.kernel_size[0]) // self.stride + 1) ** 2)
                self._gemm_cache = (key, w, packed)
        y = conv2d_nhwc(x_nhwc, self.conv.weight, self.conv.bias, self.stride, gemm_weight=w, packed=packed)  # (B, G, G, types*dim)
        return squash(y.reshape(y.shape[0], -1, self.dim).float())  # (B, I, dim)


class DigitCaps(nn.Module):
    """One dim_in x dim_out W per (primary capsule i, class j); predictions u_hat = W u."""

    def __init__(self, *, num_in: int, num_out: int, dim_in: int, dim_out: int):
        super().__init__()
        # std sqrt(3 / I), not a fixed 0.01: the first s (c = 1/J) then starts about as long as one primary capsule
        # for any I, off squash's flat |s|^2 region; 0.01 left the paper CapsNet's |v| ~ 3e-4 (capsviz.analysis.early_learning)
        self.W = nn.Parameter((3 / num_in) ** 0.5 * torch.randn(num_in, num_out, dim_out, dim_in))
        self._cache = None

    def weight(self, dtype: torch.dtype) -> torch.Tensor:
        """W laid out (I, K, J*D) for the batched matmul. At inference the layout (and the cast
        under autocast) is made once per weight version, not per call: at batch 1 that copy of
        the 1.5M weights took as long as the matmul itself."""
        I, J, D, K = self.W.shape
        if torch.is_grad_enabled():
            return self.W.permute(0, 3, 1, 2).reshape(I, K, J * D)
        key = (self.W._version, self.W.data_ptr(), dtype)
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self.W.detach().permute(0, 3, 1, 2).reshape(I, K, J * D).to(dtype).contiguous())
        return self._cache[1]

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """u (B, I, K) -> u_hat laid out (B, J, I, D) for `dynamic_routing_ji`."""
        I, J, D, K = self.W.shape
        B = u.shape[0]
        w = self.weight(compute_dtype(self.W))  # (I, K, J*D)
        u_hat = torch.bmm(u.transpose(0, 1).to(w.dtype), w)  # (I, B, J*D): one small matmul per capsule i
        return u_hat.view(I, B, J, D).permute(1, 2, 0, 3).contiguous()  # (B, J, I, D)


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
        if key not in self._index:
            ids = torch.arange(H * W * T, device=device).view(H, W, T)
            patches = ids.unfold(0, self.k, self.s).unfold(1, self.k, self.s)  # (Ho, Wo, T, K, K)
            self._index[key] = patches.permute(0, 1, 3, 4, 2).reshape(-1, self.k * self.k * T)
        return self._index[key]

    def forward(self, pose, a, record: bool = False, iterations: int | None = None):
        """`iterations` overrides the layer's own for this call only: a model cached across
        sessions is never changed by one request."""
        B, H, W, T, _ = pose.shape
        it = self.iterations if iterations is None else iterations
        k, s = self.k, self.s
        Ho, Wo = conv_out(H, k, s), conv_out(W, k, s)
        P, I, J = Ho * Wo, k * k * T, self.W.shape[1]
        route = dict(final_lambda=self.final_lambda, lower_index=self.lower_index(H, W, T, pose.device), num_lower=H * W * T)
        if not record and use_native(pose):  # the kernel gathers each receptive field's slots itself
            lambdas = lambda_schedule(it, self.final_lambda)
            a_out, mu = native.em_routing(
                pose.reshape(B, H * W * T, 16),
                self.W,
                a.reshape(B, H * W * T),
                self.beta_u,
                self.beta_a,
                route["lower_index"],
                lambdas,
                VAR_FLOOR,
            )
            res = EMRoutingResult(a=a_out.to(pose.dtype), mu=mu.to(pose.dtype))
            return res.mu.view(B, Ho, Wo, J, 16), res.a.view(B, Ho, Wo, J), res
        p = pose.unfold(1, k, s).unfold(2, k, s)  # (B, Ho, Wo, T, 16, K, K)
        a_p = a.unfold(1, k, s).unfold(2, k, s).permute(0, 1, 2, 4, 5, 3).reshape(B, P, I)  # (B, P, Kin)
        if record:  # the public path, which also keeps the votes for the app's histograms
            p = p.permute(0, 1, 2, 5, 6, 3, 4).reshape(B, P, I, 4, 4)  # (B, P, Kin, 4, 4)
            votes = torch.einsum("bpkxy,kjyz->bpkjxz", p, self.W).flatten(-2)  # (B, P, Kin, J, 16)
            res = em_routing(votes, a_p, it, self.beta_u, self.beta_a, record=True, **route)
        else:
            with torch.autocast(pose.device.type, enabled=False):
                Vc, centre, scale = self._centred_votes(p.float(), B, P, I, J)
                res = em_centred(Vc, centre, scale, a_p.float(), it, self.beta_u, self.beta_a, var_floor=VAR_FLOOR, record=False, **route)
            res.a, res.mu = res.a.to(pose.dtype), res.mu.to(pose.dtype)
        return res.mu.view(B, Ho, Wo, J, 16), res.a.view(B, Ho, Wo, J), res

    def _centred_votes(self, p, B, P, I, J):
        """Votes (B, P, J, I, 16) for `em_centred`, already centred on each upper capsule's mean
        vote and scaled, made by one batched GEMM per receptive-field slot that writes them
        centred: no passes over the vote tensor before routing but one transposing copy.

        Each slot's 4x4 transform acts as a (16, J*16) block matrix on the flattened pose, so one
        GEMM gives a slot's votes for every upper capsule. The scale is a bound, not the exact
        largest vote: |vote - centre| <= 2 * 4 * max|pose| * max|W| per image."""
        N = B * P
        poses = p.permute(5, 6, 3, 0, 1, 2, 4).reshape(I, B, P, 16)  # (Kin, B, P, 16) in (ky, kx, t) slot order
        eye = torch.eye(4, dtype=p.dtype, device=p.device)
        Wb = torch.einsum("ab,ijyz->iayjbz", eye, self.W.float()).reshape(I, 16, J * 16)  # row (x, y), col (j, x, z)
        bound = poses.detach().abs().amax(dim=(0, 2, 3)) * self.W.detach().abs().max()  # (B,)
        scale = (8 * bound).clamp_min(1.0).view(B, 1, 1, 1)
        poses = (poses / scale.view(1, B, 1, 1)).view(I, N, 16)
        # a constant offset, as in em_routing: the result does not depend on it in exact arithmetic
        centre = (poses.detach().transpose(0, 1).reshape(N, I * 16) @ Wb.detach().reshape(I * 16, J * 16)) / I  # (N, J*16)
        V = torch.baddbmm(-centre.unsqueeze(0), poses, Wb)  # (Kin, N, J*16) centred, scaled
        Vc = V.view(I, B, P, J, 16).permute(1, 2, 3, 0, 4).contiguous()  # (B, P, J, Kin, 16)
        return Vc, centre.view(B, P, J, 16) * scale, scale


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
        if not record and use_native(pose):
            # every (position, type) is one slot of a single routing group, and its own lower capsule
            I = H * W * T
            slots = torch.arange(I, device=pose.device)
            offset = None if self.coords is None else self.coords.view(H, W, 1, 16).expand(H, W, T, 16).reshape(I, 16)
            lambdas = lambda_schedule(it, self.final_lambda)
            a_out, mu = native.em_routing(
                pose.reshape(B, I, 16),
                self.W[slots % T],
                a.reshape(B, I),
                self.beta_u,
                self.beta_a,
                slots.view(1, I),
                lambdas,
                VAR_FLOOR,
                offset,
            )
            return EMRoutingResult(a=a_out.view(B, -1).to(pose.dtype), mu=mu.view(B, -1, 16).to(pose.dtype))
        votes = torch.einsum("bhwtxy,tjyz->bhwtjxz", pose.view(B, H, W, T, 4, 4), self.W).flatten(-2)  # (B, H, W, T, J, 16)
        if self.coords is not None:
            votes = votes + self.coords.view(H, W, 1, 1, 16)
        res = em_routing(
            votes.reshape(B, H * W * T, -1, 16),  # (B, I, J, 16)
            a.reshape(B, H * W * T),
            it,
            self.beta_u,
            self.beta_a,
            final_lambda=self.final_lambda,
            record=record,
        )
        return res


def use_native(pose: torch.Tensor) -> bool:
    """Route with the fused native kernel (forward and backward): on the CPU, where it could be built."""
    return pose.device.type == "cpu" and native.available()


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
