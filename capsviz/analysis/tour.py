"""The guided tour: one image followed through a trained capsule network, step by step: a
dynamic-routing CapsNet, matrix capsules with EM routing, or Efficient-CapsNet with its one pass
of self-attention routing.

Everything a step shows comes from the model's own layers and routing functions run once on the
image, with every routing iteration recorded; the page only picks what to draw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from capsviz.analysis import as_batch, coupling_entropy
from capsviz.analysis.rules import NEAR_UNIFORM_ENTROPY as NEAR_UNIFORM
from capsviz.analysis.zoo import parameter_counts
from capsviz.glossary import DIGIT_WORDS, ClassWords
from capsviz.routing import efficient_squash, squash

SHOWN = 6  # primary capsules followed by name through routing: few enough to read their numbers
MAPS = 16  # Conv1 feature maps drawn


@dataclass
class Step:
    key: str  # stable name (tests, the URL stays a number)
    title: str


def capsnet_steps(iterations: int, words: ClassWords = DIGIT_WORDS) -> list[Step]:
    """`words`: the model's (capsviz.glossary.class_words): digit capsules only for digits."""
    return [
        Step("input", "The input"),
        Step("conv1", "Conv1: local features"),
        Step("primary", "PrimaryCaps: vectors on a 6x6 grid"),
        Step("predictions", f"Predictions u_hat for every {words.capsule}"),
        *[Step(f"iteration{t + 1}", f"Routing, iteration {t + 1} of {iterations}") for t in range(iterations)],
        Step("lengths", f"{'DigitCaps' if words.digits else 'Class capsules'}: lengths are the answer"),
        Step("reconstruction", f"The decoder redraws the {words.shown}"),
        Step("lab", "Does routing matter? This model in the routing lab"),
    ]


def matrix_steps(iterations: int) -> list[Step]:
    return [
        Step("input", "The input"),
        Step("primary", "Primary capsules: a pose matrix and an activation"),
        Step("votes", "Votes for every class capsule"),
        *[Step(f"iteration{t + 1}", f"EM routing, iteration {t + 1} of {iterations}") for t in range(iterations)],
        Step("activations", "Class capsules: activations are the answer"),
    ]


def efficient_steps(words: ClassWords = DIGIT_WORDS) -> list[Step]:
    return [
        Step("input", "The input"),
        Step("convs", "Four convolutions: local features"),
        Step("primary", "Primary capsules: vectors that see the whole image"),
        Step("predictions", "Predictions u_hat for every class capsule"),
        Step("routing", "Self-attention routing, in one pass"),
        Step("lengths", "Class capsules: lengths are the answer"),
        Step("reconstruction", f"The decoder redraws the {words.shown}"),
        Step("lab", "Does routing matter? This model in the routing lab"),
    ]


def _plane(vectors: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """(2, D): an orthonormal basis whose first axis is `first` (so a dot product with it is
    exact in the picture) and whose second is the main remaining direction of `vectors` (N, D)."""
    e1 = first / first.norm().clamp_min(1e-12)
    rest = vectors - (vectors @ e1).unsqueeze(-1) * e1
    _, _, Vt = torch.linalg.svd(rest, full_matrices=False)
    e2 = Vt[0] - (Vt[0] @ e1) * e1
    return torch.stack([e1, e2 / e2.norm().clamp_min(1e-12)])


@dataclass
class CapsNetTour:
    """One image through a dynamic-routing CapsNet.

    conv1: (MAPS, H', W') the strongest Conv1 maps, conv1_ids their channels, conv1_total how many.
    primary_len: (G, G, types) primary capsule lengths; arrow_len (G, G) the longest per position,
    arrow_dir (G, G, 2) its direction projected on the two main directions of all primary vectors.
    shown: (SHOWN,) indices of the primary capsules followed; shown_names their places.
    b, c: (T, I, J); s, v: (T, J, D); lengths: (J,) final |v_j|; winner, runner_up: class ids.
    pred2d: (J, SHOWN, 2) the shown capsules' predictions for each class in that class's plane,
    s2d, v2d: (T, J, 2) each iteration's s_j and v_j in the same planes.
    """

    image: np.ndarray
    conv1: np.ndarray
    conv1_ids: np.ndarray
    conv1_total: int
    primary_len: np.ndarray
    arrow_len: np.ndarray
    arrow_dir: np.ndarray
    shown: np.ndarray
    shown_names: list[str]
    pred_len: np.ndarray  # (SHOWN, J) |u_hat_j|i| of the shown capsules
    b: np.ndarray
    c: np.ndarray
    s: np.ndarray
    v: np.ndarray
    lengths: np.ndarray
    winner: int
    runner_up: int
    pred2d: np.ndarray
    s2d: np.ndarray
    v2d: np.ndarray
    reconstruction: np.ndarray | None
    grid: int
    types: int
    pred_all_len: np.ndarray  # (I, J) |u_hat_j|i| of every primary capsule

    @property
    def iterations(self) -> int:
        return len(self.c)

    def mean_coupling(self, t: int, j: int) -> float:
        """Iteration t's coupling to class j, averaged over every primary capsule."""
        return float(self.c[t, :, j].mean())

    def weighted_coupling(self, t: int, j: int) -> float:
        """The same, weighted by the length of each capsule's prediction for j: long predictions
        are the ones that count in s_j."""
        w = self.pred_all_len[:, j]
        return float((self.c[t, :, j] * w).sum() / max(w.sum(), 1e-12))


@torch.no_grad()
def capsnet_tour(model, image: np.ndarray, iterations: int | None = None) -> CapsNetTour:
    cfg = model.config
    T = iterations or cfg.routing_iterations
    x = as_batch(image)
    h = model.features(x)[0]  # (H', W', C) after ReLU
    strength = h.mean((0, 1))  # (C,)
    ids = strength.argsort(descending=True)[:MAPS]
    conv1 = h[:, :, ids].permute(2, 0, 1)  # (MAPS, H', W')
    u = model.primary_capsules(x)  # (1, I, 8)
    G, K = cfg.primary_grid, cfg.primary_types
    lengths_u = u[0].norm(dim=-1)  # (I,)
    per_cell = lengths_u.view(G, G, K)
    best = per_cell.argmax(-1)  # (G, G)
    vectors = u[0].view(G, G, K, -1)
    chosen = vectors.gather(2, best.view(G, G, 1, 1).expand(G, G, 1, vectors.shape[-1])).squeeze(2)  # (G, G, 8)
    _, _, Vt = torch.linalg.svd(u[0] - u[0].mean(0), full_matrices=False)
    flat = chosen.reshape(-1, chosen.shape[-1]) @ Vt[:2].T  # (G*G, 2): the two main directions of this image's pose vectors
    direction = flat / flat.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    u_hat = model.digits(u)  # (1, J, I, D)
    r = model.route(u_hat, routing="dynamic", iterations=T, record=True)  # with the model's own routing options
    c = r.c[:, 0]  # (T, I, J)
    s = torch.einsum("tij,jid->tjd", c, u_hat[0])  # (T, J, D): Eq. 2 with routing's own couplings
    v = r.v_trace[:, 0]  # (T, J, D)
    final = v[-1].norm(dim=-1)  # (J,)
    order = final.argsort(descending=True)
    winner, runner = int(order[0]), int(order[1])
    pred_len = u_hat[0].norm(dim=-1).T  # (I, J)
    shown = pred_len[:, winner].argsort(descending=True)[:SHOWN]  # the loudest predictions for the winner

    J = u_hat.shape[1]
    pred2d = torch.zeros(J, SHOWN, 2)
    s2d, v2d = torch.zeros(len(c), J, 2), torch.zeros(len(c), J, 2)
    for j in range(J):
        P = _plane(u_hat[0, j], v[-1, j])  # (2, D)
        pred2d[j] = u_hat[0, j, shown] @ P.T
        s2d[:, j] = s[:, j] @ P.T
        v2d[:, j] = v[:, j] @ P.T
    names = [f"type {int(i) % K + 1} at row {int(i) // K // G + 1}, col {int(i) // K % G + 1}" for i in shown]
    rec = model.decode(v[-1, winner], winner)[0].numpy() if model.decoder is not None else None
    return CapsNetTour(
        image=np.asarray(image, np.float32),
        conv1=conv1.numpy(),
        conv1_ids=ids.numpy(),
        conv1_total=int(h.shape[-1]),
        primary_len=per_cell.numpy(),
        arrow_len=per_cell.max(-1).values.numpy(),
        arrow_dir=direction.view(G, G, 2).numpy(),
        shown=shown.numpy(),
        shown_names=names,
        pred_len=pred_len[shown].numpy(),
        b=r.b[:, 0].numpy(),
        c=c.numpy(),
        s=s.numpy(),
        v=v.numpy(),
        lengths=final.numpy(),
        winner=winner,
        runner_up=runner,
        pred2d=pred2d.numpy(),
        s2d=s2d.numpy(),
        v2d=v2d.numpy(),
        reconstruction=rec,
        grid=G,
        types=K,
        pred_all_len=pred_len.numpy(),
    )


def squashed(s: np.ndarray) -> np.ndarray:
    return squash(torch.as_tensor(s)).numpy()


@dataclass
class MatrixTour:
    """One image through a matrix-capsule model; the class layer's EM recorded.

    primary_a: (H, W, types) primary activations; pose: (4, 4) the most active primary capsule's
    pose matrix, pose_where its place. R: (T, I, J); a: (T, J); mu, sigma: (T, J, 16);
    lambdas: (T,); votes2d: (J, SHOWN, 2) the most active lower capsules' votes for each class in
    that class's plane; mu2d, sigma2d: (T, J, 2) each Gaussian in the same planes.
    """

    image: np.ndarray
    primary_a: np.ndarray
    pose: np.ndarray
    pose_where: str
    shown: np.ndarray
    shown_names: list[str]
    R: np.ndarray
    a: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    lambdas: np.ndarray
    votes2d: np.ndarray
    mu2d: np.ndarray
    sigma2d: np.ndarray
    a_in: np.ndarray
    winner: int
    runner_up: int
    class_layer_in: tuple[int, int, int]  # (H, W, types) of the capsules the class layer routes

    @property
    def iterations(self) -> int:
        return len(self.R)


@torch.no_grad()
def matrix_tour(model, image: np.ndarray, iterations: int | None = None) -> MatrixTour:
    x = as_batch(image)
    out = model.trace(x, iterations)
    tr = out.trace
    h = torch.relu(model.conv1(x))
    pose, a = model.primary(h)  # (1, H, W, types, 16), (1, H, W, types)
    H, W, K = a.shape[1:]
    top = int(a[0].flatten().argmax())
    r_, c_, k_ = top // (W * K), top // K % W, top % K
    a_fin = tr.a_trace[-1, 0]  # (J,)
    order = a_fin.argsort(descending=True)
    winner, runner = int(order[0]), int(order[1])
    votes = tr.votes[0].float()  # (I, J, 16)
    I, J, _ = votes.shape
    # the class layer's lower capsules are ConvCaps2's outputs, (H2, W2, types) flattened as ClassCaps does
    a_in = out.layer_traces["convcaps2"].a[0].reshape(-1).float()  # (I,)
    H2 = W2 = model.final_grid
    K2 = I // (H2 * W2)
    shown = a_in.argsort(descending=True)[:SHOWN]
    names = [f"type {int(i) % K2 + 1} at row {int(i) // K2 // W2 + 1}, col {int(i) // K2 % W2 + 1}" for i in shown]
    T = tr.R.shape[0]
    votes2d = torch.zeros(J, SHOWN, 2)
    mu2d, sigma2d = torch.zeros(T, J, 2), torch.zeros(T, J, 2)
    mu, sigma = tr.mu_trace[:, 0].float(), tr.sigma[:, 0].float()  # (T, J, 16)
    for j in range(J):
        centre = mu[-1, j]
        P = _plane(votes[:, j] - centre, votes[shown, j].mean(0) - centre + 1e-6)  # (2, 16)
        votes2d[j] = (votes[shown, j] - centre) @ P.T
        mu2d[:, j] = (mu[:, j] - centre) @ P.T
        sigma2d[:, j] = ((P**2) @ (sigma[:, j] ** 2).T).T.sqrt()  # the spread along each drawn axis
    return MatrixTour(
        image=np.asarray(image, np.float32),
        primary_a=a[0].numpy(),
        pose=pose[0, r_, c_, k_].view(4, 4).numpy(),
        pose_where=f"type {k_ + 1} at row {r_ + 1}, col {c_ + 1}",
        shown=shown.numpy(),
        shown_names=names,
        R=tr.R[:, 0].numpy(),
        a=tr.a_trace[:, 0].numpy(),
        mu=mu.numpy(),
        sigma=sigma.numpy(),
        lambdas=tr.lambdas.numpy(),
        votes2d=votes2d.numpy(),
        mu2d=mu2d.numpy(),
        sigma2d=sigma2d.numpy(),
        a_in=a_in.numpy(),
        winner=winner,
        runner_up=runner,
        class_layer_in=(H2, W2, K2),
    )


@dataclass
class EfficientTour:
    """One image through Efficient-CapsNet; its self-attention routing recorded (one pass).

    sizes: [(channels, side)] after each convolution; maps: (MAPS, S, S) the strongest maps of the
    last one (after its ReLU, before its BatchNorm), map_ids their channels.
    s_primary, u: (I, K) the primary capsules before and after Efficient-CapsNet's squash.
    pred_len: (I, J) |u_hat_j|i|; a: (I, J) the attention logits a_ij; c: (I, J) couplings;
    prior: (I, J) the learned prior b_ij; s, v: (J, D) with s_j = sum_i (c_ij + b_ij) u_hat_j|i;
    lengths: (J,) |v_j|; entropy: (I,) each c_i's entropy over log J (1 = uniform).
    """

    image: np.ndarray
    sizes: list[tuple[int, int]]
    maps: np.ndarray
    map_ids: np.ndarray
    grid: int  # side of the depthwise filter: the whole last map
    s_primary: np.ndarray
    u: np.ndarray
    pred_len: np.ndarray
    a: np.ndarray
    c: np.ndarray
    prior: np.ndarray
    s: np.ndarray
    v: np.ndarray
    lengths: np.ndarray
    entropy: np.ndarray
    winner: int
    runner_up: int
    reconstruction: np.ndarray | None
    parameters: int  # without the decoder

    @property
    def iterations(self) -> int:
        return 1  # one pass

    @property
    def primary_len(self) -> np.ndarray:
        return np.linalg.norm(self.u, axis=-1)

    @property
    def near_uniform(self) -> bool:
        """The couplings keep more of the uniform split's entropy than the routing lab calls near uniform."""
        return float(self.entropy.mean()) > NEAR_UNIFORM

    def decided(self, share: float = 0.5) -> np.ndarray:
        """The primary capsules that send more than `share` of their vote to one class."""
        return np.flatnonzero(self.c.max(-1) > share)


@torch.no_grad()
def efficient_tour(model, image: np.ndarray) -> EfficientTour:
    x = as_batch(image)
    sizes, maps = [], None
    h = x
    for layer in model.convs:
        h = layer(h)
        if isinstance(layer, torch.nn.ReLU):
            maps = h[0]  # (C, S, S): the last one is kept
        if isinstance(layer, torch.nn.BatchNorm2d):
            sizes.append((int(h.shape[1]), int(h.shape[-1])))
    ids = maps.mean((1, 2)).argsort(descending=True)[:MAPS]
    I, K = model.num_primary, model.config.primary_dim
    s_primary = model.primary(h).view(I, K)  # (I, K): the depthwise conv's C numbers as I capsules of K
    u = model.primary_capsules(x)  # (1, I, K)
    u_hat = model.predictions(x)  # (1, J, I, D)
    r = model.route(u_hat, record=True)
    c, a = r.c[0, 0], r.b[0, 0]  # (I, J) each
    prior = r.prior if r.prior is not None else torch.zeros_like(c)  # (I, J)
    s = torch.einsum("ij,jid->jd", c + prior, u_hat[0])  # (J, D): the sum routing squashed, from its own c and b
    v = r.v[0]  # (J, D)
    lengths = v.norm(dim=-1)  # (J,)
    order = lengths.argsort(descending=True)
    winner, runner = int(order[0]), int(order[1])
    J = c.shape[1]
    entropy = coupling_entropy(c) / np.log(J)  # (I,)
    rec = model.decode(v[winner], winner)[0].numpy() if model.decoder is not None else None
    return EfficientTour(
        image=np.asarray(image, np.float32),
        sizes=sizes,
        maps=maps[ids].numpy(),
        map_ids=ids.numpy(),
        grid=int(model.primary.kernel_size[0]),
        s_primary=s_primary.numpy(),
        u=u[0].numpy(),
        pred_len=u_hat[0].norm(dim=-1).T.numpy(),
        a=a.numpy(),
        c=c.numpy(),
        prior=prior.numpy(),
        s=s.numpy(),
        v=v.numpy(),
        lengths=lengths.numpy(),
        entropy=entropy.numpy(),
        winner=winner,
        runner_up=runner,
        reconstruction=rec,
        parameters=parameter_counts(model).without_decoder,
    )


def efficient_squashed(s: np.ndarray) -> np.ndarray:
    return efficient_squash(torch.as_tensor(s)).numpy()


@dataclass(frozen=True)
class Tour:
    """How to follow an image through one kind of routing: the walk and its steps."""

    follow: Callable[..., CapsNetTour | MatrixTour | EfficientTour]
    steps: Callable[[int, ClassWords], list[Step]]  # from the tour's routing iterations and the model's words


TOURS = {  # by ModelConfig.routing
    "dynamic": Tour(capsnet_tour, capsnet_steps),
    "em": Tour(matrix_tour, lambda iterations, _words: matrix_steps(iterations)),  # class capsules for every dataset
    "self-attention": Tour(efficient_tour, lambda _, words: efficient_steps(words)),  # one pass: no iterations to count
}
