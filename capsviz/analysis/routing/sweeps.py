"""Routing over many images or many iteration counts: Appendix A's change of b over a batch, how
far routing moves the couplings from uniform, and the same weights routed 1 to T times."""

from __future__ import annotations

import numpy as np
import torch

from capsviz.analysis import as_batch
from capsviz.analysis.routing.traces import DynamicTrace, entropy_of


@torch.no_grad()
def _channels(images: torch.Tensor) -> torch.Tensor:
    return images.unsqueeze(1) if images.dim() == 3 else images  # (B, C, H, W)


def mean_b_change(model, images: torch.Tensor, iterations: int, routing: str = "dynamic") -> np.ndarray:
    """(T,) Appendix A averaged over a batch of images (B, H, W) or (B, C, H, W) float, routed with
    `routing` whatever couplings the model was trained with."""
    return model.trace(_channels(images), iterations, routing=routing).trace.b_change.mean(1).numpy()


@torch.no_grad()
def coupling_summary(model, images: torch.Tensor, iterations: int | None = None, routing: str = "dynamic") -> dict:
    """How far routing moves the couplings away from uniform, over a batch of images (B, H, W) in
    [0, 1]. Per iteration: the mean coupling of a primary capsule to the predicted class, plainly
    and weighted by the length of its vote for that class (long votes are the ones that count in
    s_j), and the mean coupling entropy along the axis the couplings sum to 1 over (`softmax`:
    "classes", uniform 1/J and entropy log J, the paper's; "inputs", the model's own dynamic
    routing sums each class's couplings over the I inputs: uniform 1/I, entropy log I, and the mean
    coupling to a class is 1/I whatever the routing). `routing` (one of capsviz.routing.ROUTINGS)
    is the routing the model is run with; the one-pass routings give one entry per list."""
    u_hat = model.predictions(_channels(images))  # (B, J, I, D)
    r = model.route(u_hat, routing=routing, iterations=iterations, record=True)
    T, B, I, J = r.c.shape
    softmax = getattr(getattr(model, "config", None), "routing_softmax", "classes") if routing == "dynamic" else "classes"
    pred = r.v.norm(dim=-1).argmax(1)  # (B,)
    to_pred = r.c.gather(3, pred.view(1, B, 1, 1).expand(T, B, I, 1)).squeeze(3)  # (T, B, I)
    vote = u_hat.norm(dim=-1).gather(1, pred.view(B, 1, 1).expand(B, 1, I)).squeeze(1)  # (B, I): |u_hat_pred|i|
    entropy = entropy_of(r.c.numpy(), softmax)  # (T, B, I) or (T, B, J)
    n = I if softmax == "inputs" else J
    return {
        "n_images": B,
        "softmax": softmax,
        "uniform": 1.0 / n,
        "coupling_to_prediction": to_pred.mean((1, 2)).tolist(),
        "vote_weighted_coupling_to_prediction": ((to_pred * vote).sum((1, 2)) / vote.sum().clamp_min(1e-12)).tolist(),
        "entropy": entropy.mean((1, 2)).tolist(),
        "uniform_entropy": float(np.log(n)),
    }


@torch.no_grad()
def iteration_sweep(model, image: np.ndarray, max_iterations: int = 10) -> dict:
    """The same weights routed with 1..max_iterations: lengths (T, J), predictions, reconstructions.

    Procedure 1 with t iterations is the first t iterations of a longer run, so one recorded run
    of max_iterations gives every v, and the decoder redraws all T winners in one batch."""
    r = model.trace(as_batch(image), max_iterations, routing="dynamic").trace  # whatever couplings it was trained with
    return _sweep(model, r.v_trace[:, 0])  # (T, J, D): v after each iteration


def sweep_of_trace(model, tr: DynamicTrace) -> dict:
    """`iteration_sweep`'s answer from a recorded trace (its v after each iteration) without routing
    again: lengths (T, J), predictions and reconstructions for 1..T iterations."""
    return _sweep(model, torch.from_numpy(tr.v))


@torch.no_grad()
def _sweep(model, v: torch.Tensor) -> dict:
    """v (T, J, D), the class capsules after each iteration, as the sweep shows them: lengths
    (T, J), each count's prediction, and the decoder's drawing of each winner, in one batch."""
    T = len(v)
    lengths = v.norm(dim=-1)  # (T, J)
    preds = lengths.argmax(1)  # (T,)
    recs = [None] * T
    if model.decoder is not None:
        recs = list(model.decode(v[torch.arange(T), preds], preds).numpy())  # T x (H, W)
    return {"lengths": lengths.numpy(), "predictions": preds.tolist(), "reconstructions": recs}
