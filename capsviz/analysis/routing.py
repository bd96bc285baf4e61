"""What the routing inspector pages draw, computed from the core's recorded traces (numpy out)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from capsviz.analysis import as_batch, coupling_entropy


@dataclass
class DynamicTrace:
    """One image through a dynamic-routing CapsNet with every iteration recorded.

    c: (T, I, J) coupling coefficients; grid, types: I = grid * grid * types primary capsules.
    lengths: (T, J) |v_j| after each iteration; b_change: (T,) mean |delta b| (Appendix A);
    c_change: (T - 1,) mean |c_{t+1} - c_t|, how much the couplings still move.
    agreement: (I, J) u_hat_j|i . v_j after the last iteration; entropy: (T, I) of each c_i.
    """

    c: np.ndarray
    lengths: np.ndarray
    b_change: np.ndarray
    c_change: np.ndarray
    agreement: np.ndarray
    entropy: np.ndarray
    grid: int
    types: int

    def coupling_maps(self, t: int) -> np.ndarray:
        """(J, grid, grid): iteration t's coupling to each class, averaged over capsule types."""
        T, I, J = self.c.shape
        return self.c[t].reshape(self.grid, self.grid, self.types, J).mean(2).transpose(2, 0, 1)

    def coupling_by_type(self, t: int, j: int) -> np.ndarray:
        """(types, grid * grid): coupling of every primary capsule to class j at iteration t."""
        return self.c[t, :, j].reshape(self.grid * self.grid, self.types).T

    def agreement_map(self, j: int) -> np.ndarray:
        """(grid, grid): summed agreement with class j over the capsule types at each position."""
        return self.agreement[:, j].reshape(self.grid, self.grid, self.types).sum(2)


@torch.no_grad()
def dynamic_trace(model, image: np.ndarray, iterations: int) -> DynamicTrace:
    u_hat = model.predictions(as_batch(image))  # (1, J, I, D)
    r = model.route(u_hat, routing="dynamic", iterations=iterations, record=True)  # with the model's own routing options
    c = r.c[:, 0].numpy()  # (T, I, J)
    agreement = (u_hat[0] @ r.v[0].unsqueeze(-1)).squeeze(-1).T.numpy()  # (I, J)
    entropy = coupling_entropy(c)  # (T, I)
    cfg = model.config
    c_change = np.abs(np.diff(c, axis=0)).mean((1, 2))  # (T-1,)
    lengths = r.v_trace[:, 0].norm(dim=-1).numpy()
    return DynamicTrace(c, lengths, r.b_change[:, 0].numpy(), c_change, agreement, entropy, cfg.primary_grid, cfg.primary_types)


@dataclass
class AttentionTrace:
    """One image through self-attention routing (Efficient-CapsNet), one pass.

    c: (I, J) couplings, softmax over the classes of the attention logits a: (I, J);
    prior: (I, J) the learned log prior b, added to c in s_j = sum_i (c_ij + b_ij) u_hat_j|i;
    lengths: (J,) |v_j|; entropy: (I,) of each c_i; vote: (I, J) |u_hat_j|i|, each prediction's length.
    """

    c: np.ndarray
    a: np.ndarray
    prior: np.ndarray
    lengths: np.ndarray
    entropy: np.ndarray
    vote: np.ndarray


@torch.no_grad()
def attention_trace(model, image: np.ndarray) -> AttentionTrace:
    u_hat = model.predictions(as_batch(image))  # (1, J, I, D)
    r = model.route(u_hat, routing="self-attention", record=True)
    c = r.c[0, 0].numpy()  # (I, J)
    prior = r.prior.numpy() if r.prior is not None else np.zeros_like(c)
    entropy = coupling_entropy(c)  # (I,)
    return AttentionTrace(c, r.b[0, 0].numpy(), prior, r.v[0].norm(dim=-1).numpy(), entropy, u_hat[0].norm(dim=-1).T.numpy())


@torch.no_grad()
def _channels(images: torch.Tensor) -> torch.Tensor:
    return images.unsqueeze(1) if images.dim() == 3 else images  # (B, C, H, W)


def mean_b_change(model, images: torch.Tensor, iterations: int) -> np.ndarray:
    """(T,) Appendix A averaged over a batch of images (B, H, W) or (B, C, H, W) float."""
    return (
        model.trace(_channels(images), iterations, routing="dynamic").trace.b_change.mean(1).numpy()
    )  # whatever couplings it was trained with


@torch.no_grad()
def coupling_summary(model, images: torch.Tensor, iterations: int | None = None, routing: str = "dynamic") -> dict:
    """How far routing moves the couplings away from uniform (1/J), over a batch of images
    (B, H, W) in [0, 1]. Per iteration: the mean coupling of a primary capsule to the predicted
    class, plainly and weighted by the length of its vote for that class (long votes are the ones
    that count in s_j), and the mean coupling entropy (uniform: log J). `routing` (one of
    capsviz.routing.ROUTINGS) is the routing the model is run with; the one-pass routings give one
    entry per list."""
    u_hat = model.predictions(_channels(images))  # (B, J, I, D)
    r = model.route(u_hat, routing=routing, iterations=iterations, record=True)
    T, B, I, J = r.c.shape
    pred = r.v.norm(dim=-1).argmax(1)  # (B,)
    to_pred = r.c.gather(3, pred.view(1, B, 1, 1).expand(T, B, I, 1)).squeeze(3)  # (T, B, I)
    vote = u_hat.norm(dim=-1).gather(1, pred.view(B, 1, 1).expand(B, 1, I)).squeeze(1)  # (B, I): |u_hat_pred|i|
    entropy = coupling_entropy(r.c)  # (T, B, I)
    return {
        "n_images": B,
        "uniform": 1.0 / J,
        "coupling_to_prediction": to_pred.mean((1, 2)).tolist(),
        "vote_weighted_coupling_to_prediction": ((to_pred * vote).sum((1, 2)) / vote.sum().clamp_min(1e-12)).tolist(),
        "entropy": entropy.mean((1, 2)).tolist(),
        "uniform_entropy": float(np.log(J)),
    }


@torch.no_grad()
def iteration_sweep(model, image: np.ndarray, max_iterations: int = 10) -> dict:
    """The same weights routed with 1..max_iterations: lengths (T, J), predictions, reconstructions.

    Procedure 1 with t iterations is the first t iterations of a longer run, so one recorded run
    of max_iterations gives every v, and the decoder redraws all T winners in one batch."""
    r = model.trace(as_batch(image), max_iterations, routing="dynamic").trace  # whatever couplings it was trained with
    v = r.v_trace[:, 0]  # (T, J, D): v after each iteration
    lengths = v.norm(dim=-1)  # (T, J)
    preds = lengths.argmax(1)  # (T,)
    recs = [None] * max_iterations
    if model.decoder is not None:
        recs = list(model.decode(v[torch.arange(max_iterations), preds], preds).numpy())  # T x (H, W)
    return {"lengths": lengths.numpy(), "predictions": preds.tolist(), "reconstructions": recs}


@dataclass
class EMTrace:
    """One image through a matrix-capsule model; class layer and convolutional layers recorded.

    R: (T, I, J), a: (T, J), sigma: (T, J, 16), mu: (T, J, 16), lambdas: (T,) for the class layer;
    distances: (T, I, J) from each vote to its capsule's mean pose at that iteration.
    layers: name -> EMRoutingResult of each routed layer (batch of one).
    """

    R: np.ndarray
    a: np.ndarray
    sigma: np.ndarray
    mu: np.ndarray
    lambdas: np.ndarray
    distances: np.ndarray
    layers: dict


@torch.no_grad()
def em_trace(model, image: np.ndarray, iterations: int) -> EMTrace:
    out = model.trace(as_batch(image), iterations)
    tr = out.trace
    V = tr.votes[0].float()  # (I, J, 16)
    mu = tr.mu_trace[:, 0].float()  # (T, J, 16)
    distances = (V.unsqueeze(0) - mu.unsqueeze(1)).norm(dim=-1)  # (T, I, J)
    return EMTrace(
        tr.R[:, 0].numpy(),
        tr.a_trace[:, 0].numpy(),
        tr.sigma[:, 0].numpy(),
        mu.numpy(),
        tr.lambdas.numpy(),
        distances.numpy(),
        out.layer_traces,
    )


def vote_histograms(trace: EMTrace, bins: np.ndarray) -> np.ndarray:
    """(T, J, len(bins) - 1): for each iteration and class, the R-weighted histogram of vote
    distances (Fig. 2 of Hinton et al.). Votes beyond the last bin are left out, as in a zoom."""
    T, I, J = trace.R.shape
    nb = len(bins) - 1
    k = np.searchsorted(bins, trace.distances, side="right") - 1  # (T, I, J) bin of each vote
    k[trace.distances == bins[-1]] = nb - 1  # the last bin is closed, as in np.histogram
    keep = (k >= 0) & (k < nb)
    slot = (np.arange(T)[:, None, None] * J + np.arange(J)[None, None, :]) * nb + k  # (T, I, J)
    counts = np.bincount(slot[keep], weights=trace.R[keep], minlength=T * J * nb)
    return counts.reshape(T, J, nb)
