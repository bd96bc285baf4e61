"""Routing playgrounds: a handful of 2-D capsules routed by the project's own routing functions.

Nothing here re-implements routing: `dynamic_toy` calls `capsviz.routing.dynamic_routing` and
`em_toy` calls `capsviz.routing.em_routing`, both with record=True, on inputs small enough to draw
(I lower capsules, J = 2 or 3 upper capsules, 2-D poses). Only s_j, which the dynamic trace does
not store, is recomputed from the recorded couplings (Eq. 2), and tests check squash(s) against
the routing function's own v.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from capsviz.analysis import coupling_entropy
from capsviz.routing import dynamic_routing, em_routing, lambda_schedule, self_attention_routing, squash

I_TOY = 6  # lower capsules: few enough to label each one
J_MAX = 3
LIMIT = 3.0  # sliders and plots span [-LIMIT, LIMIT] in both coordinates


def _polar(length: float, degrees: float) -> list[float]:
    a = np.deg2rad(degrees)
    return [length * np.cos(a), length * np.sin(a)]


def _dynamic_presets() -> dict[str, np.ndarray]:
    """Predictions u_hat (I, J_MAX, 2). Agreement is a dot product, so "agreeing" means pointing the
    same way with some length; predictions that disagree point elsewhere. The numbers are rounded
    to the sliders' step (0.1) so a preset is exactly what its sliders show."""
    # two groups, each agreeing on its own upper capsule and scattered for the others
    cluster = [
        [_polar(2.0, 20), _polar(1.5, 200), _polar(1.2, 250)],
        [_polar(2.1, 28), _polar(1.4, 290), _polar(1.3, 130)],
        [_polar(1.9, 14), _polar(1.5, 20), _polar(1.2, 10)],
        [_polar(1.5, 250), _polar(2.0, 115), _polar(1.3, 320)],
        [_polar(1.4, 160), _polar(2.1, 108), _polar(1.2, 200)],
        [_polar(1.5, 300), _polar(1.9, 122), _polar(1.3, 60)],
    ]
    # four capsules agree on upper capsule 1; capsules 5 and 6 are outliers: their prediction for
    # upper 1 is at right angles to the cluster (agreement 0), and the predictions for upper 2
    # cancel out (its v stays short), so nothing pulls the outliers either way
    outliers = [
        [_polar(2.0, 20), _polar(1.5, 200), _polar(1.2, 250)],
        [_polar(2.1, 28), _polar(1.4, 290), _polar(1.3, 130)],
        [_polar(1.9, 14), _polar(1.5, 100), _polar(1.2, 10)],
        [_polar(2.0, 24), _polar(1.3, 20), _polar(1.4, 300)],
        [_polar(1.6, 112), _polar(1.5, 0), _polar(1.4, 60)],
        [_polar(1.7, 290), _polar(1.5, 180), _polar(1.4, 180)],
    ]
    rng = np.random.default_rng(7)  # fixed: a preset is the same for everyone who opens the link
    noise = rng.uniform(-2.0, 2.0, (I_TOY, J_MAX, 2))
    return {
        name: np.round(np.asarray(p, np.float64), 1) + 0.0
        for name, p in {"agreeing cluster": cluster, "outliers": outliers, "noise": noise}.items()
    }


def _em_presets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Votes (I, J_MAX, 2) and lower activations a_in (I,). Each upper capsule gets its own votes
    (in a network, through its own transform W_ij): a group of lower capsules whose votes for one
    upper capsule land close together is a cluster that capsule can explain."""
    # capsules 1-3 vote tightly for upper 1 (spread ~0.05), capsules 4-6 loosely for upper 2
    # (spread ~0.3); each group's votes for the other capsules are scattered far apart
    two = [
        [[1.0, 1.0], [-2.5, -2.0], [2.5, -2.5]],
        [[1.1, 0.9], [2.5, 2.5], [-2.5, 2.5]],
        [[1.0, 1.1], [2.5, -2.5], [0.0, -2.5]],
        [[-2.5, -2.5], [-1.0, 0.5], [-2.5, -1.0]],
        [[2.5, -2.0], [-1.4, 0.9], [1.5, 2.5]],
        [[-2.5, 2.5], [-0.7, 0.1], [2.5, 0.5]],
    ]
    outliers = [
        [[1.0, 1.0], [-2.5, -2.0], [2.5, -2.5]],
        [[1.1, 0.9], [2.5, 2.5], [-2.5, 2.5]],
        [[1.0, 1.1], [2.5, -2.5], [0.0, -2.5]],
        [[0.9, 1.0], [-1.0, 2.5], [-2.5, -1.0]],
        [[-2.5, -2.0], [2.0, 0.0], [1.5, 2.5]],
        [[2.5, -2.5], [-2.0, -2.5], [-2.5, 0.5]],
    ]
    rng = np.random.default_rng(11)
    noise = rng.uniform(-2.5, 2.5, (I_TOY, J_MAX, 2))
    ones = np.ones(I_TOY)
    return {
        "two clusters": (np.asarray(two, np.float64), ones),
        "outliers": (np.asarray(outliers, np.float64), ones),
        "noise": (np.round(noise, 1) + 0.0, ones),
    }


DYNAMIC_PRESETS = _dynamic_presets()
EM_PRESETS = _em_presets()


@dataclass
class DynamicToy:
    """Procedure 1 of Sabour et al. on a toy, every iteration recorded (t = 0 .. T-1).

    u_hat: (I, J, 2) the predictions routed. b, c: (T, I, J) the logits and couplings each
    iteration used (b[0] = 0, c[0] uniform). s, v: (T, J, 2). agreement: (T, I, J) u_hat . v_t,
    what iteration t adds to b.
    """

    u_hat: np.ndarray
    b: np.ndarray
    c: np.ndarray
    s: np.ndarray
    v: np.ndarray
    agreement: np.ndarray

    @property
    def iterations(self) -> int:
        return len(self.c)

    def entropy(self) -> np.ndarray:
        """(T, I): how undecided each lower capsule is (log J when uniform, 0 when all to one)."""
        return coupling_entropy(self.c)


def dynamic_toy(u_hat: np.ndarray, iterations: int = 3) -> DynamicToy:
    """u_hat (I, J, D) -> DynamicToy, routed by `capsviz.routing.dynamic_routing`."""
    u = torch.as_tensor(np.asarray(u_hat), dtype=torch.float64).unsqueeze(0)  # (1, I, J, D): float64, the toy's numbers printed exactly
    r = dynamic_routing(u, iterations, record=True)
    c = r.c[:, 0]  # (T, I, J)
    s = torch.einsum("tij,ijd->tjd", c, u[0])  # (T, J, D): Eq. 2 with the couplings routing used
    v = r.v_trace[:, 0]  # (T, J, D)
    agreement = torch.einsum("ijd,tjd->tij", u[0], v)  # (T, I, J)
    return DynamicToy(np.asarray(u_hat, np.float64), r.b[:, 0].numpy(), c.numpy(), s.numpy(), v.numpy(), agreement.numpy())


def attention_toy(u_hat: np.ndarray) -> DynamicToy:
    """u_hat (I, J, D) -> a one-iteration DynamicToy routed by `capsviz.routing.self_attention_routing`
    (Efficient-CapsNet, no learned prior): b holds the attention logits a_ij = u_hat_j|i . sum_k
    u_hat_j|k / sqrt(D), c their softmax over j, v uses Efficient-CapsNet's squash; agreement is a."""
    u = torch.as_tensor(np.asarray(u_hat), dtype=torch.float64).unsqueeze(0)  # (1, I, J, D)
    r = self_attention_routing(u.movedim(2, 1), record=True)  # takes (B, J, I, D)
    c, a = r.c[:, 0], r.b[:, 0]  # (1, I, J)
    s = torch.einsum("tij,ijd->tjd", c, u[0])  # (1, J, D)
    return DynamicToy(np.asarray(u_hat, np.float64), a.numpy(), c.numpy(), s.numpy(), r.v_trace[:, 0].numpy(), a.numpy())


def squash_np(s: np.ndarray) -> np.ndarray:
    """The routing module's squash on numpy (tests compare the toy's s with its v)."""
    return squash(torch.as_tensor(s, dtype=torch.float64)).numpy()


@dataclass
class EMToy:
    """EM routing (Procedure 1 of Hinton et al.) on a toy, every iteration recorded.

    votes: (I, J, 2); a_in: (I,). R: (T, I, J) the assignments each M-step used (R[0] uniform).
    mu, sigma: (T, J, 2) each M-step's Gaussian: mean pose and spread per coordinate.
    a: (T, J) each M-step's activation; lambdas: (T,) the inverse temperature schedule.
    """

    votes: np.ndarray
    a_in: np.ndarray
    R: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    a: np.ndarray
    lambdas: np.ndarray

    @property
    def iterations(self) -> int:
        return len(self.R)


def em_toy(
    votes: np.ndarray,
    a_in: np.ndarray,
    iterations: int = 3,
    beta_u: float = 0.0,
    beta_a: float = 0.0,
    final_lambda: float = 0.3,
) -> EMToy:
    """votes (I, J, H), a_in (I,) -> EMToy, routed by `capsviz.routing.em_routing` (its defaults:
    variance floor, linear lambda ramp, costs standardised across the J capsules)."""
    V = torch.as_tensor(np.asarray(votes), dtype=torch.float32)
    a = torch.as_tensor(np.asarray(a_in), dtype=torch.float32)
    r = em_routing(V, a, iterations, beta_u, beta_a, final_lambda=final_lambda, record=True)
    return EMToy(
        np.asarray(votes, np.float64),
        np.asarray(a_in, np.float64),
        r.R.numpy(),
        r.mu_trace.numpy(),
        r.sigma.numpy(),
        r.a_trace.numpy(),
        np.asarray(lambda_schedule(iterations, final_lambda)),
    )


def encode_points(points: np.ndarray) -> str:
    """Points (any shape) -> a compact URL value: numbers at one decimal joined by '_'."""
    return "_".join(f"{x:.1f}".rstrip("0").rstrip(".") if x else "0" for x in np.round(np.asarray(points).ravel(), 1) + 0.0)


def decode_points(text: str | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """The inverse of `encode_points`, or None when `text` is absent or malformed (a hand-edited link)."""
    if not text:
        return None
    try:
        values = np.array([float(x) for x in text.split("_")], np.float64)
    except ValueError:
        return None
    if values.size != int(np.prod(shape)) or not np.all(np.isfinite(values)):
        return None
    return np.clip(values, -LIMIT, LIMIT).reshape(shape)
