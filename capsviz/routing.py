"""Routing between capsule layers, as pure functions with optional per-iteration traces.

Vector capsules (predictions u_hat laid out (B, J, I, D)), interchangeable through `route`:
- `uniform_couplings`: c_ij = 1/J, no routing (= dynamic routing with one iteration).
- `random_couplings`: c_i = softmax(r_i), r drawn once from a fixed seed, never updated.
- `dynamic_routing_ji`: routing by agreement (Sabour et al. 2017, Procedure 1).
- `dynamic_routing_options`: the same with the variations public code has (`DynamicOptions`):
  softmax over the input capsules, logits averaged over the batch, a learned prior, another squash.
- `self_attention_routing`: one pass of self-attention (Mazzia et al. 2021, Efficient-CapsNet).
Matrix capsules: `em_routing` (Hinton et al. 2018), whose inputs (votes and activations) differ;
`em_procedure_1` is the same algorithm written plainly in the paper's symbols, its reference.

The iterative algorithms loop over routing *iterations* only; every capsule is handled by tensor
ops. Shapes: B batch, I lower capsules, J upper capsules, D pose dims, T iterations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from capsviz import registry
from capsviz.families.capsnet.config import CLASS_SQUASH_AXES, ROUTING_LOGITS, ROUTING_SOFTMAX, SQUASH_FORMS
from capsviz.kernels import dynamic as dynamic_kernel
from capsviz.kernels import em as em_kernel
from capsviz.kernels import policy
from capsviz.kernels.policy import compile_em  # noqa: F401  (the trainer turns it on through here)

EPS = 1e-8
VAR_FLOOR = 1e-4  # EM variances are floored here (true units)
# ... and never below this in scaled units: the E-step's 1/sig2 has the gradient -1/sig2^2, which
# overflows float32 below ~1e-19 (votes beyond ~1e4 reach it; the native kernel uses the same)
FLOOR_SCALED = 1e-12


def squash(s: torch.Tensor, dim: int = -1, eps: float = EPS) -> torch.Tensor:
    """Eq. 1 of Sabour et al.: keeps the direction, maps the length into [0, 1).

    The epsilon sits inside the square root so the gradient at s = 0 is finite. Vectors with an
    entry beyond 1 are first divided by their largest entry m (a constant: the formula below
    equals Eq. 1 for any m > 0), so |s|^2 cannot overflow: Eq. 1 in x = s / m is
    |x|^2 / (1/m^2 + |x|^2) * x / sqrt(|x|^2 + eps/m^2), the plain formula when m = 1.
    """
    m = s.detach().abs().amax(dim, keepdim=True).clamp_min(1.0)
    x = s / m
    n2 = (x * x).sum(dim, keepdim=True)
    inv_m2 = m.reciprocal().square()  # underflows to 0 for huge m, where the length is 1
    return (n2 / (inv_m2 + n2)) * x / torch.sqrt(n2 + eps * inv_m2)


def efficient_squash(s: torch.Tensor, dim: int = -1, eps: float = EPS) -> torch.Tensor:
    """Efficient-CapsNet's squash (Mazzia et al. 2021): v = (1 - 1/e^|s|) s / |s|.

    Near 0 the length grows like |s| (Eq. 1's like |s|^2), and long vectors saturate faster. The
    epsilon inside the square root keeps the gradient at s = 0 finite."""
    n = torch.sqrt((s * s).sum(dim, keepdim=True) + eps)
    return (1 - torch.exp(-n)) * s / n


@dataclass
class RoutingResult:
    """Output of every vector-capsule routing (`route`); the trace fields are None unless record=True.

    v: (B, J, D) upper capsule outputs after the last iteration.
    c: (T, B, I, J) coupling coefficients used at each iteration (c[0] is uniform for dynamic
        routing); T = 1 for the one-pass routings.
    b: (T, B, I, J) the logits each c came from (b[0] is zero for dynamic routing; r for random
        couplings; the attention logits a_ji for self-attention).
    v_trace: (T, B, J, D) upper capsule outputs at each iteration.
    b_change: (T, B) mean |b_{t+1} - b_t| per image: the agreement added at iteration t
        (Appendix A, Fig. A.1). Recorded for the last iteration too, although its b is unused.
        None for the one-pass routings, which have no iterations.
    prior: (I, J) self-attention's learned log prior, added to c in s_j = sum_i (c_ij + b_ij) u_hat_j|i.
    """

    v: torch.Tensor
    c: torch.Tensor | None = None
    b: torch.Tensor | None = None
    v_trace: torch.Tensor | None = None
    b_change: torch.Tensor | None = None
    prior: torch.Tensor | None = None


def dynamic_routing(u_hat: torch.Tensor, iterations: int = 3, record: bool = False) -> RoutingResult:
    """Routing-by-agreement (Procedure 1 of Sabour et al. 2017).

    u_hat: (B, I, J, D) predictions of each lower capsule i for each upper capsule j.

    Gradients: the iterations are unrolled and nothing is detached, so backprop reaches u_hat
    (and the W that made it) through every path: through s directly, and through the
    logits b, whose agreement terms u_hat . v depend on u_hat and on the earlier v. b and c are
    per image and never learned. The trace is detached and does not change the result.
    """
    return dynamic_routing_ji(u_hat.movedim(2, 1).contiguous(), iterations, record)  # (B, J, I, D)


def dynamic_routing_ji(u_hat: torch.Tensor, iterations: int = 3, record: bool = False) -> RoutingResult:
    """`dynamic_routing` on predictions laid out (B, J, I, D): both sums over i and d are then
    batched matmuls that read u_hat in place (the (B, I, J, D) layout costs a copy per op)."""
    _check_iterations(iterations)
    res = _route(u_hat, iterations, record)
    if u_hat.dtype != torch.float64 and not bool(torch.isfinite(res.v).all()) and bool(torch.isfinite(u_hat).all()):
        # predictions so large (beyond ~1e33) that the sums over lower capsules or the agreements
        # overflow: routed again in float64, which holds them; v (length < 1), c and b come back
        # in the input's dtype. Checked on the small v, not on u_hat: no extra pass over the votes.
        with torch.autocast(u_hat.device.type, enabled=False):
            res = _route(u_hat.double(), iterations, record)
        for name in ("v", "c", "b", "v_trace", "b_change"):
            if getattr(res, name) is not None:
                setattr(res, name, getattr(res, name).to(u_hat.dtype))
    return res


def _route(u_hat: torch.Tensor, iterations: int, record: bool) -> RoutingResult:
    if policy.hand_backward(u_hat, record):  # the same iterations, their gradient written out by hand
        return RoutingResult(v=dynamic_kernel.routing_hand_backward(u_hat, iterations, procedure_1, squash))
    cs, bs, vs, changes = [], [], [], []
    for b, c, _, v, a in procedure_1(u_hat, iterations, last_agreement=record):
        if record:
            cs.append(c.detach().transpose(1, 2))  # (B, I, J)
            bs.append(b.detach().transpose(1, 2))  # (B, I, J)
            vs.append(v.detach())  # (B, J, D)
            changes.append(a.detach().abs().mean(dim=(1, 2)))  # (B,)
    if not record:
        return RoutingResult(v=v)
    return RoutingResult(v=v, c=torch.stack(cs), b=torch.stack(bs), v_trace=torch.stack(vs), b_change=torch.stack(changes))


def procedure_1(u_hat: torch.Tensor, iterations: int, last_agreement: bool = False):
    """Procedure 1 on u_hat (B, J, I, D), the one definition every path runs: yields per iteration
    the logits b and couplings c (B, J, I), s and v (B, J, D), and the agreement u_hat . v
    (B, J, I) that b takes next (None at the last iteration unless `last_agreement`)."""
    B, J, I, D = u_hat.shape
    b = u_hat.new_zeros(B, J, I)  # (B, J, I) routing logits, uniform couplings at first
    for t in range(iterations):
        c = b.softmax(dim=1)  # (B, J, I): each lower capsule splits its vote over the J uppers
        s = (c.unsqueeze(-2) @ u_hat).squeeze(-2)  # (B, J, D): s_j = sum_i c_ij u_hat_j|i
        v = squash(s)  # (B, J, D)
        last = t == iterations - 1
        a = agreement(u_hat, v) if last_agreement or not last else None  # (B, J, I)
        yield b, c, s, v, a
        if not last:
            b = b + a


def agreement(u_hat: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """u_hat (B, J, I, D) . v (B, J, D) -> (B, J, I). As v's row times u_hat's transposed
    view: MKL then streams u_hat as one long row product, faster than u_hat @ v's 16-long dot products."""
    return (v.unsqueeze(-2) @ u_hat.transpose(-1, -2)).squeeze(-2)  # (B, J, I)


@dataclass(frozen=True, eq=False)
class DynamicOptions:
    """How a dynamic routing written elsewhere differs from Procedure 1; the defaults are the paper's.

    softmax: what the couplings c sum to 1 over (ROUTING_SOFTMAX): "classes", each input capsule
        splits its vote over the J class capsules (the paper); "inputs", each class capsule's
        couplings sum to 1 over the I input capsules (what `F.softmax(b)` on (1, I, J, 1) gives).
    logits: "image", each image's logits b are its own (the paper); "batch", the agreements are
        averaged over the images routed together, so every image of a batch gets the same
        couplings and an image's class capsules depend on the other images in its batch;
        "batch-sum", the same with the agreements summed over those images.
    batch: with "batch", how many consecutive images are routed together (0: all that are passed).
    prior: a learned routing prior (I, J): the logits b start from it instead of 0.
    squash: the squash of the class capsules (SQUASHES' names).
    squash_axis: what that squash normalises (CLASS_SQUASH_AXES): "capsule", each class capsule's
        D values (the paper); "classes", each of the D values over the J classes (`squash(s, dim=1)`
        of (B, J, D), as some public code writes it); "all", an image's whole (J, D) map at once."""

    softmax: str = "classes"
    logits: str = "image"
    batch: int = 0
    prior: torch.Tensor | None = None
    squash: str = "sabour"
    squash_axis: str = "capsule"

    @property
    def paper(self) -> bool:
        """Whether these are Procedure 1's own (then the fast paths run)."""
        return self.prior is None and (self.softmax, self.logits, self.squash, self.squash_axis) == (
            "classes",
            "image",
            "sabour",
            "capsule",
        )


def dynamic_routing_options(u_hat: torch.Tensor, iterations: int = 3, options: DynamicOptions = DynamicOptions(), record: bool = False):
    """Dynamic routing on u_hat (B, J, I, D) with `options`; Procedure 1 itself when they are the
    paper's. The plain PyTorch reference: no fast path, every gradient through autograd.
    The trace is laid out as `RoutingResult` says (with batch logits each image's c and b are its
    batch's); b_change is the mean |change of b| each image saw."""
    _check_iterations(iterations)
    if (
        options.softmax not in ROUTING_SOFTMAX
        or options.logits not in ROUTING_LOGITS
        or options.squash not in SQUASHES
        or options.squash_axis not in SQUASH_DIMS
    ):
        raise ValueError(f"unknown dynamic routing options {options}")
    if options.paper:
        return dynamic_routing_ji(u_hat, iterations, record)
    B = u_hat.shape[0]
    step = options.batch if options.logits != "image" and options.batch else B
    parts = [_route_options(u_hat[s : s + step], iterations, options, record) for s in range(0, B, step)]
    if len(parts) == 1:
        return parts[0]
    dims = {"v": 0, "c": 1, "b": 1, "v_trace": 1, "b_change": 1}  # the batch axis of each field
    return RoutingResult(
        **{k: None if parts[0].__dict__[k] is None else torch.cat([p.__dict__[k] for p in parts], d) for k, d in dims.items()}
    )


def _route_options(u_hat: torch.Tensor, iterations: int, options: DynamicOptions, record: bool) -> RoutingResult:
    B, J, I, D = u_hat.shape
    shared = options.logits != "image"
    b = u_hat.new_zeros(1 if shared else B, J, I)  # (B or 1, J, I)
    if options.prior is not None:
        b = b + options.prior.T.to(u_hat.dtype)  # (I, J) -> (J, I), the same start for every image
    axis = 1 if options.softmax == "classes" else 2
    squash_v = class_squash(options.squash, options.squash_axis)
    cs, bs, vs, changes = [], [], [], []
    for t in range(iterations):
        c = b.softmax(dim=axis).expand(B, J, I)  # (B, J, I)
        v = squash_v((c.unsqueeze(-2) @ u_hat).squeeze(-2))  # (B, J, D): s_j = sum_i c_ij u_hat_j|i
        a = agreement(u_hat, v)  # (B, J, I)
        if shared:  # (1, J, I): the batch's mean agreement, or its sum
            a = a.mean(0, keepdim=True) if options.logits == "batch" else a.sum(0, keepdim=True)
        if record:
            cs.append(c.detach().transpose(1, 2))  # (B, I, J)
            bs.append(b.detach().expand(B, J, I).transpose(1, 2))  # (B, I, J)
            vs.append(v.detach())
            changes.append(a.detach().abs().mean(dim=(1, 2)).expand(B))  # (B,)
        if t < iterations - 1:
            b = b + a
    if not record:
        return RoutingResult(v=v)
    return RoutingResult(v=v, c=torch.stack(cs), b=torch.stack(bs), v_trace=torch.stack(vs), b_change=torch.stack(changes))


# Fixed random couplings: r ~ N(0, RANDOM_SCALE^2), drawn once from RANDOM_SEED. With J = 10, a
# scale of 1 gives each lower capsule a clearly non-uniform split (on average its largest c is
# 0.32, its smallest 0.017, its entropy 0.84 log J) without sending all of its vote to one class.
RANDOM_SEED = 0
RANDOM_SCALE = 1.0


def uniform_couplings(u_hat: torch.Tensor, *, squash: Callable = squash, record: bool = False) -> RoutingResult:
    """No routing: c_ij = 1/J, s_j = sum_i c_ij u_hat_j|i, v_j = squash(s_j). u_hat (B, J, I, D).

    Procedure 1 with one iteration (b = 0, so softmax(b) is uniform): a CapsNet trained with one
    iteration was trained without routing."""
    B, J, I, D = u_hat.shape
    c = u_hat.new_full((B, J, I), 1.0 / J)  # (B, J, I)
    return _one_pass(u_hat, u_hat.new_zeros(B, J, I), c, squash, record)


def random_couplings(
    u_hat: torch.Tensor, *, seed: int = RANDOM_SEED, scale: float = RANDOM_SCALE, squash: Callable = squash, record: bool = False
) -> RoutingResult:
    """Fixed random couplings: c_i = softmax_j(r_i), r (I, J) ~ N(0, scale^2) drawn from `seed`
    (the same for every image and call, never learned), s_j = sum_i c_ij u_hat_j|i, v_j = squash(s_j).

    A baseline that separates "any non-uniform split" from "a split computed from agreement"."""
    B, J, I, D = u_hat.shape
    r = scale * torch.randn(I, J, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)  # (I, J)
    r = r.T.to(u_hat.device, u_hat.dtype).expand(B, J, I)  # (B, J, I)
    return _one_pass(u_hat, r, r.softmax(dim=1), squash, record)


def self_attention_routing(
    u_hat: torch.Tensor, prior: torch.Tensor | None = None, *, squash: Callable = efficient_squash, record: bool = False
) -> RoutingResult:
    """Self-attention routing (Mazzia et al. 2021, Efficient-CapsNet), one pass:
    a_ji = (1 / sqrt(D)) sum_k u_hat_j|i . u_hat_j|k, c_ji = softmax over j of a_ji,
    s_j = sum_i (c_ji + b_ji) u_hat_j|i, v_j = squash(s_j) (their squash by default).

    u_hat (B, J, I, D); prior: the learned log prior b (J, I), zero when None."""
    B, J, I, D = u_hat.shape
    total = u_hat.sum(dim=2, keepdim=True)  # (B, J, 1, D): sum_k u_hat_j|k, so each row sum costs I*D, not I*I*D
    a = (u_hat @ total.transpose(-1, -2)).squeeze(-1) / math.sqrt(D)  # (B, J, I)
    c = a.softmax(dim=1)  # (B, J, I): each lower capsule splits its vote over the J classes
    res = _one_pass(u_hat, a, c, squash, record, prior)
    if record and prior is not None:
        res.prior = prior.detach().T  # (I, J)
    return res


def _one_pass(u_hat, b, c, squash, record, prior=None) -> RoutingResult:
    """s_j = sum_i (c_ij [+ prior_ij]) u_hat_j|i and v = squash(s) from couplings c and their logits
    b, both (B, J, I); traced with T = 1 as `RoutingResult` lays it out."""
    w = c if prior is None else c + prior  # (B, J, I)
    v = squash((w.unsqueeze(-2) @ u_hat).squeeze(-2))  # (B, J, D)
    if not record:
        return RoutingResult(v=v)
    c, b = c.detach().transpose(1, 2)[None], b.detach().transpose(1, 2)[None]  # (1, B, I, J)
    return RoutingResult(v=v, c=c, b=b, v_trace=v.detach()[None])


def __getattr__(name: str):
    """ROUTINGS: the names of the vector-capsule routings `route` runs (capsviz.registry.ROUTINGS,
    read when asked, so a routing registered there is one of them): every one takes u_hat
    (B, J, I, D) and gives v (B, J, D)."""
    if name == "ROUTINGS":
        return registry.vector_routings()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The squash forms a model may use, by name (capsviz.config.SQUASH_FORMS)
SQUASHES: dict[str, Callable] = {"sabour": squash, "efficient": efficient_squash}
assert tuple(SQUASHES) == SQUASH_FORMS
# The dims of s (B, J, D) each class-capsule squash normalises over, by CLASS_SQUASH_AXES' names;
# None: none of them, each value is squashed on its own
SQUASH_DIMS: dict[str, int | tuple[int, int] | None] = {"capsule": -1, "classes": -2, "all": (-2, -1), "value": None}
assert tuple(SQUASH_DIMS) == CLASS_SQUASH_AXES


def class_squash(form: str = "sabour", axis: str = "capsule") -> Callable:
    """The squash of the class capsules s (B, J, D): the form `form` (SQUASHES) over `axis` (SQUASH_DIMS)."""
    f, dim = SQUASHES[form], SQUASH_DIMS[axis]
    if dim is None:
        return lambda s: f(s.unsqueeze(-1)).squeeze(-1)  # (B, J, D, 1): a length-1 vector per value
    return f if axis == "capsule" else (lambda s: f(s, dim=dim))


def route(
    name: str,
    u_hat: torch.Tensor,
    *,
    iterations: int = 3,
    prior: torch.Tensor | None = None,
    squash: Callable | None = None,
    record: bool = False,
    dynamic: DynamicOptions | None = None,
) -> RoutingResult:
    """Route predictions u_hat (B, J, I, D) by the routing called `name` (one of ROUTINGS: the
    vector-capsule routings of capsviz.registry.ROUTINGS), so a model can be run with any of them.
    `iterations` is dynamic routing's; `prior` (J, I) is self-attention's learned log prior (zero
    when None); `squash` is the model's own for the one-pass routings, each one's paper's when None
    (dynamic routing uses Eq. 1 unless `dynamic` says otherwise: its agreements are measured on
    those v, and its hand-written backward assumes it). `dynamic`: dynamic routing's options
    (`DynamicOptions`; None: Procedure 1's)."""
    entry = registry.ROUTINGS.get(name)
    if entry is None or not entry.vector:
        raise ValueError(f"unknown routing {name!r}; choose from {', '.join(registry.vector_routings())}")
    return entry.function(u_hat, iterations=iterations, prior=prior, squash=squash, record=record, dynamic=dynamic)


# What `route` calls for each registered routing (capsviz.registry.ROUTINGS names them): every one
# takes the same keywords and uses those it needs.


def route_dynamic(u_hat, *, iterations=3, prior=None, squash=None, record=False, dynamic=None) -> RoutingResult:
    if dynamic is not None and not dynamic.paper:
        return dynamic_routing_options(u_hat, iterations, dynamic, record)
    return dynamic_routing_ji(u_hat, iterations, record)


def route_uniform(u_hat, *, iterations=3, prior=None, squash=None, record=False, dynamic=None) -> RoutingResult:
    return uniform_couplings(u_hat, record=record, **({} if squash is None else {"squash": squash}))


def route_random(u_hat, *, iterations=3, prior=None, squash=None, record=False, dynamic=None) -> RoutingResult:
    return random_couplings(u_hat, record=record, **({} if squash is None else {"squash": squash}))


def route_self_attention(u_hat, *, iterations=3, prior=None, squash=None, record=False, dynamic=None) -> RoutingResult:
    return self_attention_routing(u_hat, prior, record=record, **({} if squash is None else {"squash": squash}))


@dataclass
class EMRoutingResult:
    """Output of `em_routing`; trace fields are None unless record=True.

    a: (*N, J) upper activations; mu: (*N, J, H) upper poses (H = 16 for 4x4 matrices).
    R: (T, *N, I, J) assignments used by the M-step of each iteration (R[0] is uniform).
    mu_trace, sigma: (T, *N, J, H) means and standard deviations from each M-step.
    a_trace: (T, *N, J) activations from each M-step. lambdas: (T,) inverse temperatures.
    votes: (*N, I, J, H) the votes routed (detached), for vote-distance plots.
    """

    a: torch.Tensor
    mu: torch.Tensor
    R: torch.Tensor | None = None
    mu_trace: torch.Tensor | None = None
    sigma: torch.Tensor | None = None
    a_trace: torch.Tensor | None = None
    lambdas: torch.Tensor | None = None
    votes: torch.Tensor | None = None


def _check_iterations(iterations) -> None:
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"routing needs a whole number of iterations, at least 1; got {iterations!r}")


def lambda_schedule(iterations: int, final_lambda: float) -> list[float]:
    """Inverse temperature per iteration: rises linearly, reaching final_lambda at the last one.

    The paper only says lambda rises "on a fixed schedule"; a linear ramp keeps the first
    iterations soft (every capsule stays partly active) and the last one decisive.
    """
    _check_iterations(iterations)
    return [final_lambda * (t + 1) / iterations for t in range(iterations)]


def em_routing(
    votes: torch.Tensor,
    a_in: torch.Tensor,
    iterations: int = 3,
    beta_u: torch.Tensor | float = 0.0,
    beta_a: torch.Tensor | float = 0.0,
    *,
    final_lambda: float = 0.3,
    var_floor: float = VAR_FLOOR,
    lower_index: torch.Tensor | None = None,
    num_lower: int | None = None,
    record: bool = False,
) -> EMRoutingResult:
    """EM routing (Procedure 1 of Hinton et al. 2018).

    votes: (*N, I, J, H) vote of lower capsule i for upper capsule j; a_in: (*N, I).
    beta_u, beta_a: learned, broadcastable to (J,). Returns a (*N, J) and mu (*N, J, H).

    Convolutional layers pass N = (B, P) output positions, votes (B, P, I, J, H) where I is the
    slot in the receptive field, and `lower_index` (P, I) naming the lower capsule (one of
    `num_lower`) behind each slot. The E-step then normalises each lower capsule's assignments
    over every upper capsule it reaches, at all positions, as the paper says: a capsule near
    the border reaches fewer positions and so sends fewer, larger votes.

    Departures from the paper's formulas, all for numerical safety or scale:
    - All statistics are computed in float32 whatever the input dtype (bfloat16 cannot hold
      the log-densities of tight clusters); results are cast back to the input dtype.
    - Votes are centred on their unweighted mean and scaled by their largest magnitude before
      the moments are taken (sums of V and V^2 as batched matmuls), which cannot change the
      result in exact arithmetic but keeps float32 finite for very large votes. `ConvCaps`
      makes its votes centred inside the vote GEMM and calls `em_centred` directly.
    - Variances are floored at `var_floor`; p and R are computed in log space (logsumexp).
    - The summed cost of each upper capsule is standardised across the J capsules it competes with
      (zero mean, unit spread) before the logistic: a = logistic(lambda (beta_a - z_j)). With the raw
      cost, tight initial clusters (log sigma ~ -3 over 16 dims) saturate every activation near 1
      and the spread loss gets no gradient. Only the ranking of costs survives, which is what the
      competition between capsules needs.
    - lambda follows `lambda_schedule` (linear ramp to `final_lambda`). The default 0.3 keeps the
      logistic out of saturation: with z in [-3, 3] every a_j stays in [0.29, 0.71] (before beta_a
      is learned), so the spread loss always has a gradient. At 3.0 the capsule with the tightest
      initial votes sat at a ~ 1 for every image and training collapsed onto that class (RESULTS.md).
    """
    with torch.autocast(votes.device.type, enabled=False):
        V, a = votes.float(), a_in.float()
        if votes.numel() and bool(votes.detach().abs().amax() > EM_EXACT_F32):
            V, a = _Widen.apply(V), _Widen.apply(a)
            beta_u, beta_a = (_Widen.apply(b) if isinstance(b, torch.Tensor) else b for b in (beta_u, beta_a))
        Vc, centre, scale = _centre_and_scale(V.movedim(-2, -3).contiguous(), per_image=lower_index is not None)
        out = em_centred(Vc, centre, scale, a, iterations, beta_u, beta_a, final_lambda, var_floor, lower_index, num_lower, record)
    dt = votes.dtype
    out.a, out.mu = out.a.to(dt), out.mu.to(dt)
    if record:
        out.R = out.R.movedim(-1, -2)  # (T, *N, I, J)
        out.votes = votes.detach()
    return out


def em_procedure_1(
    V: torch.Tensor,
    a_in: torch.Tensor,
    iterations: int = 3,
    beta_u: torch.Tensor | float = 0.0,
    beta_a: torch.Tensor | float = 0.0,
    *,
    final_lambda: float = 0.3,
    var_floor: float = VAR_FLOOR,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Procedure 1 of Hinton et al. (2018), EM routing, in the paper's symbols for one group of
    capsules: the readable reference that `em_routing` (centred, scaled, batched, traced, with the
    convolutional layers' normalisation) is tested against, as `procedure_1` is for dynamic routing.

    V: (I, J, H) vote V_ij of lower capsule i for upper capsule j (H = 16, a 4x4 pose); a_in: (I,)
    the lower activations a_i; beta_u, beta_a: learned, a number or (J,). Returns the upper
    activations a_j (J,) and mean poses mu_j (J, H). capsviz's documented choices (`em_routing`):
    the variance floored at `var_floor`, the cost standardised across the J capsules, and the
    inverse temperature lambda on `lambda_schedule`. `em_procedure_1_steps` yields every iteration."""
    *_, (_, a, mu, _) = em_procedure_1_steps(V, a_in, iterations, beta_u, beta_a, final_lambda=final_lambda, var_floor=var_floor)
    return a, mu


def em_procedure_1_steps(
    V: torch.Tensor,
    a_in: torch.Tensor,
    iterations: int = 3,
    beta_u: torch.Tensor | float = 0.0,
    beta_a: torch.Tensor | float = 0.0,
    *,
    final_lambda: float = 0.3,
    var_floor: float = VAR_FLOOR,
):
    """`em_procedure_1`, one iteration at a time: yields (R (I, J) the assignments its M-step used,
    a (J,), mu (J, H), sigma (J, H) the standard deviations, floor included) for each iteration."""
    I, J, H = V.shape
    beta_u = torch.as_tensor(beta_u, dtype=V.dtype)
    beta_u = beta_u.reshape(J, 1) if beta_u.dim() else beta_u  # per capsule j, the same for every h
    R = V.new_full((I, J), 1.0 / J)  # R_ij: the share of capsule i's vote that j explains, uniform at first
    for t, lambda_ in enumerate(lambda_schedule(iterations, final_lambda)):
        # M-step, every upper capsule j: fit a Gaussian to the votes, weighted by R_ij a_i
        Ra = R * a_in.unsqueeze(1)  # (I, J): R_ij a_i
        S = Ra.sum(0)  # (J,): sum_i R_ij a_i
        mu = (Ra.unsqueeze(2) * V).sum(0) / (S.unsqueeze(1) + EPS)  # (J, H): mu_j^h
        sigma2 = (Ra.unsqueeze(2) * (V - mu) ** 2).sum(0) / (S.unsqueeze(1) + EPS) + var_floor  # (J, H): (sigma_j^h)^2
        cost = ((beta_u + 0.5 * torch.log(sigma2)) * S.unsqueeze(1)).sum(1)  # (J,): sum_h (beta_u + log sigma_j^h) sum_i R_ij a_i
        z = (cost - cost.mean()) / ((cost - cost.mean()).pow(2).mean().sqrt() + 1e-6)  # standardised across the J capsules
        a = torch.sigmoid(lambda_ * (beta_a - z))  # (J,): a_j = logistic(lambda (beta_a - cost_j))
        yield R, a, mu, sigma2.sqrt()
        if t == iterations - 1:
            break
        # E-step, every lower capsule i: how probable its vote is under each j's Gaussian, times a_j
        log_p = -0.5 * ((V - mu) ** 2 / sigma2).sum(2) - 0.5 * torch.log(sigma2).sum(1)  # (I, J); constants cancel
        R = (torch.log(a) + log_p).softmax(dim=1)  # (I, J): R_ij = a_j p_ij / sum_k a_k p_ik


# Votes beyond this are routed in float64: float32 holds their moments (the scaling below), but
# not the gradients, which pass through 1/(sum of R a + EPS) and the scale (~|votes| / EPS at zero
# input activation) and overflow it from about 1e30.
EM_EXACT_F32 = 1e20


class _Widen(torch.autograd.Function):
    """x in float64; its gradient back in x's dtype, saturated at that dtype's largest value where
    the true one is larger (d mu / d a with huge votes and no input activation)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.dtype = x.dtype
        return x.double()

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        big = torch.finfo(ctx.dtype).max
        return g.clamp(-big, big).to(ctx.dtype)


def _centre_and_scale(V: torch.Tensor, per_image: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """V (*N, J, I, H) -> ((V - centre) / scale, centre (*N, J, H), scale): centre is the unweighted
    mean vote of each upper capsule, scale the largest centred magnitude (at least 1), per routing
    group or, with `per_image`, one per image (dim 0), as a shared softmax over positions needs."""
    centre = V.detach().mean(dim=-2, keepdim=True)  # (*N, J, 1, H)
    Vc = V - centre
    dims = tuple(range(1, V.dim())) if per_image else (-3, -2, -1)
    scale = Vc.detach().abs().amax(dim=dims, keepdim=True).clamp_min(1.0)  # (*N|B, 1, 1, 1)
    return Vc / scale, centre.squeeze(-2), scale.squeeze(-1)


def em_centred(Vc, centre, scale, a_in, iterations, beta_u, beta_a, final_lambda, var_floor, lower_index, num_lower, record):
    """EM on float32 votes already centred and scaled, laid out (*N, J, I, H) (see `em_routing`);
    `centre` (*N, J, H) and `scale` (broadcasts to (*N, J, H)) map poses back to true units.
    ConvCaps' fast path calls this directly with votes made centred by its own GEMM."""
    steps = em_kernel.core(_em)  # the same steps, torch.compile'd when `compile_em()` is on
    out = steps(Vc, scale, a_in, iterations, beta_u, beta_a, final_lambda, var_floor, lower_index, num_lower, record)
    out.mu = out.mu + centre
    if record:
        out.mu_trace = out.mu_trace + centre
    return out


def _em(Vc, scale, a_in, iterations, beta_u, beta_a, final_lambda, var_floor, lower_index, num_lower, record):
    """EM on centred, scaled votes laid out (*N, J, I, H): both reductions are batched matmuls
    reading the votes in place. Returns mu in scaled units times scale (the caller adds the centre)."""
    *N, J, I, H = Vc.shape
    V2 = Vc * Vc  # (*N, J, I, H): second moments from one more pass, not from a concatenated copy
    floor = (var_floor / scale**2).clamp_min(FLOOR_SCALED)  # the floor in scaled units
    log_scale = torch.log(scale)
    a_in = a_in.unsqueeze(-2)  # (*N, 1, I)
    R = None
    beta_u = torch.as_tensor(beta_u, dtype=Vc.dtype, device=Vc.device)
    beta_u = beta_u.unsqueeze(-1) if beta_u.dim() else beta_u  # (J, 1) against (*N, J, H)
    lambdas = lambda_schedule(iterations, final_lambda)
    Rs, mus, sigmas, acts = [], [], [], []
    for t, lambda_ in enumerate(lambdas):
        # M-step (the first one with uniform assignments 1/J)
        Rp = a_in.expand(*N, J, I) / J if R is None else R * a_in  # (*N, J, I)
        S = Rp.sum(-1, keepdim=True)  # (*N, J, 1)
        w = (Rp / (S + EPS)).unsqueeze(-2)  # (*N, J, 1, I)
        mu = (w @ Vc).squeeze(-2)  # (*N, J, H)
        sig2 = ((w @ V2).squeeze(-2) - mu * mu).clamp_min(0) + floor  # (*N, J, H) scaled units
        log_sigma = 0.5 * torch.log(sig2) + log_scale  # (*N, J, H) true units
        cost = ((beta_u + log_sigma) * S).sum(-1)  # (*N, J)
        dev = cost - cost.mean(-1, keepdim=True)  # (*N, J)
        # the spread's gradient is taken as 0 where all costs are equal (no input activation), as
        # in the native kernel; torch's std would give 0/0 there
        sd = torch.sqrt((dev * dev).mean(-1, keepdim=True).clamp_min(1e-30)) + 1e-6
        z = dev / sd
        logit_a = lambda_ * (beta_a - z)  # (*N, J)
        if record:
            Rs.append(torch.full_like(Rp, 1.0 / J) if R is None else R.detach())
            mus.append((mu * scale).detach())
            sigmas.append(log_sigma.exp().detach())
            acts.append(torch.sigmoid(logit_a).detach())
        if t == iterations - 1:
            break
        # E-step: sum_h (V - mu)^2 / sig2 expanded into two matmuls over the stored V and V^2
        inv = 1.0 / sig2  # (*N, J, H)
        quad = (V2 @ inv.unsqueeze(-1) + Vc @ (-2 * mu * inv).unsqueeze(-1)).squeeze(-1) + (mu * mu * inv).sum(-1, keepdim=True)
        quad = quad.clamp(0, 1e30)  # (*N, J, I); cancellation can dip below 0
        log_p = -0.5 * quad - 0.5 * torch.log(sig2).sum(-1, keepdim=True)  # (*N, J, I); constants cancel in R
        logits = F.logsigmoid(logit_a).unsqueeze(-1) + log_p  # (*N, J, I)
        R = _normalise(logits, lower_index, num_lower)
    res = EMRoutingResult(a=torch.sigmoid(logit_a), mu=mu * scale)
    if record:
        res.R, res.mu_trace, res.sigma, res.a_trace = (torch.stack(x) for x in (Rs, mus, sigmas, acts))  # (T, ...)
        res.lambdas = torch.tensor(lambdas)
    return res


def _normalise(logits: torch.Tensor, lower_index, num_lower) -> torch.Tensor:
    """Softmax of each lower capsule's logits over the upper capsules it reaches."""
    if lower_index is None:
        return logits.softmax(dim=-2)  # over J in (*N, J, I)
    B, P, J, I = logits.shape
    idx = lower_index.to(logits.device).unsqueeze(1).expand(P, J, I).reshape(1, -1).expand(B, -1)  # (B, P*J*I)
    flat = logits.reshape(B, -1)  # (B, P*J*I)
    peak = torch.full((B, num_lower), float("-inf"), device=logits.device)
    peak = peak.scatter_reduce(1, idx, flat.detach(), reduce="amax")  # (B, num_lower), a constant shift
    e = (flat - peak.gather(1, idx)).exp()
    Z = torch.zeros(B, num_lower, device=logits.device).scatter_add(1, idx, e)
    return (e / Z.gather(1, idx)).view(B, P, J, I)
