"""Early learning: how fast a fresh CapsNet's batch accuracy rises, under one convention changed at a time.

Every variant starts from the same seed's weights and sees the same shuffled, un-augmented MNIST
batches (Adam, lr 1e-3), so the curves differ only by the convention the variant changes. The
conventions are those where capsviz and the widely used public PyTorch CapsNet could differ:

- `layout`: which 8 numbers of PrimaryCaps' convolution form one capsule. capsviz: the 8 channels of
  one capsule type at one grid position (the paper's reading). The public one: 8 consecutive
  entries of the flattened (channel, row, col) output, i.e. mostly 8 neighbouring positions of one channel.
- `detach`: the public one routes with u_hat detached in all but the last iteration, so W gets a
  gradient only through the last s = sum_i c_i u_hat_i with c held fixed; capsviz backpropagates
  through every unrolled iteration (the logits b included).
- `w_std`: the scale of the W_ij prediction matrices (the public one: 0.01; capsviz: 0.01 until it
  measured here, now sqrt(3 / I), 0.051 for the paper's I = 1152).
- `margin_mean`: margin loss averaged over the classes instead of summed (the paper: summed; both sum).
- `recon_mean`: reconstruction as the mean squared error per pixel instead of 0.0005 x its sum
  (both use 0.0005 x the sum per image, averaged over the batch).

`python -m capsviz.analysis.early_learning [--model capsnet] [--steps 40] [--variants a,b]` prints
the loss at step 0 and the batch accuracy at steps 9, 14, 24, 34 for each variant.

Found (seed 0, paper CapsNet; RESULTS.md has the table): with W at 0.01 the first s is ~0.02 long,
squash maps it to |v| ~ 3e-4 (its |s|^2 region, where it passes almost no gradient) and the batch
accuracy stays near chance to step ~15. The loss reductions and the detached routing change
nothing; W at 0.03-0.1 (or the public code's PrimaryCaps layout, which capsviz cannot adopt
without changing what its checkpoints mean) starts learning within ~10 steps.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from capsviz.config import preset
from capsviz.data import load_split
from capsviz.data.transforms import to_float
from capsviz.losses import margin_loss, reconstruction_loss
from capsviz.models import build_model
from capsviz.routing import dynamic_routing_ji, squash

REPORT_STEPS = (9, 14, 24, 34)


@dataclass(frozen=True)
class Variant:
    """One set of conventions; the defaults are capsviz's own."""

    name: str = "capsviz"
    layout: str = "capsule"  # "capsule": 8 channels at one position; "flat": 8 consecutive NCHW entries
    detach: bool = False  # route with u_hat detached except in the last iteration
    w_std: float | None = None  # re-draw W ~ N(0, w_std^2); None keeps the model's own init
    margin_mean: bool = False
    recon_mean: bool = False
    own_forward: bool = False  # the model's forward, not this module's (a check that both agree)


VARIANTS = {
    v.name: v
    for v in (
        Variant("capsviz", own_forward=True),
        Variant("w_std=0.01", w_std=0.01),  # capsviz's W before the fix, and the public CapsNet's
        Variant("capsviz-here"),  # this module's forward with capsviz's conventions: must match "capsviz"
        Variant("layout=flat", layout="flat"),
        Variant("detach", detach=True),
        Variant("layout=flat+detach", layout="flat", detach=True),
        Variant("w_std=0.1", w_std=0.1),
        Variant("w_std=0.001", w_std=0.001),
        Variant("margin_mean", margin_mean=True),
        Variant("recon_mean", recon_mean=True),
    )
}


def variant(name: str) -> Variant:
    """A named variant, or "w_std=<float>" for any scale of W."""
    if name.startswith("w_std="):
        return Variant(name, w_std=float(name.split("=", 1)[1]))
    return VARIANTS[name]


def detached_routing(u_hat: torch.Tensor, iterations: int) -> torch.Tensor:
    """Procedure 1 on u_hat (B, J, I, D) with the agreements computed from u_hat.detach():
    the couplings c carry no gradient, and W learns only through the last iteration's s."""
    B, J, I, D = u_hat.shape
    u_const = u_hat.detach()
    b = u_hat.new_zeros(B, J, I)
    for t in range(iterations):
        c = b.softmax(dim=1)  # (B, J, I)
        last = t == iterations - 1
        s = (c.unsqueeze(-2) @ (u_hat if last else u_const)).squeeze(-2)  # (B, J, D)
        v = squash(s)
        if not last:
            b = b + (v.unsqueeze(-2) @ u_const.transpose(-1, -2)).squeeze(-2)  # (B, J, I)
    return v


def primary_capsules(model, x: torch.Tensor, layout: str) -> torch.Tensor:
    """x (B, 1, S, S) -> u (B, I, 8) under `layout`."""
    h = model.features(x)  # (B, S', S', C1)
    p = model.primary
    y = p.conv(h.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)  # (B, G, G, types*dim): the reference convolution
    B, dim = y.shape[0], p.dim
    if layout == "flat":
        y = y.permute(0, 3, 1, 2)  # (B, types*dim, G, G): the public code's view of the same numbers
    return squash(y.reshape(B, -1, dim))  # (B, I, dim)


def forward(model, x: torch.Tensor, y: torch.Tensor, variant: Variant) -> tuple[torch.Tensor, torch.Tensor]:
    """-> capsule lengths (B, J) and the label-masked reconstruction (B, H, W)."""
    if variant.own_forward:
        out = model(x, y)
        return out.scores, out.reconstruction
    u = primary_capsules(model, x, variant.layout)
    u_hat = model.digits(u)  # (B, J, I, D)
    T = model.config.routing_iterations
    v = detached_routing(u_hat, T) if variant.detach else dynamic_routing_ji(u_hat, T).v  # (B, J, D)
    lengths = v.norm(dim=-1)  # (B, J)
    return lengths, model.decoder(v, F.one_hot(y, v.shape[1]).to(v.dtype))


def loss_of(lengths, rec, x, y, variant: Variant) -> torch.Tensor:
    margin = margin_loss(lengths, y) / (lengths.shape[1] if variant.margin_mean else 1)
    if variant.recon_mean:
        return margin + F.mse_loss(rec.flatten(1), x.flatten(1))
    return margin + reconstruction_loss(rec, x)


def fixed_batches(steps: int, batch_size: int = 128, seed: int = 0, data_dir=None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The first `steps` batches of one seeded shuffle of MNIST's training split, un-augmented."""
    train = load_split("mnist", "train", data_dir)
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))[: steps * batch_size]
    return [(to_float(train.images[idx]), train.labels[idx]) for idx in order.split(batch_size)]


@torch.no_grad()
def initial_scales(model, x: torch.Tensor, variant: Variant) -> dict:
    """Mean lengths at step 0: primary capsules u, predictions u_hat, DigitCaps v."""
    u = primary_capsules(model, x, variant.layout)
    u_hat = model.digits(u)
    v = dynamic_routing_ji(u_hat, model.config.routing_iterations).v
    return {"u": u.norm(dim=-1).mean().item(), "u_hat": u_hat.norm(dim=-1).mean().item(), "v": v.norm(dim=-1).mean().item()}


def run_variant(variant: Variant, batches, *, model_name: str = "capsnet", seed: int = 0, lr: float = 1e-3) -> dict:
    """Train a fresh model from `seed` on `batches`; per-step loss, batch accuracy and W's gradient norm."""
    torch.manual_seed(seed)
    model = build_model(preset(model_name))
    if variant.w_std is not None:
        with torch.no_grad():
            model.digits.W.normal_(0.0, variant.w_std, generator=torch.Generator().manual_seed(seed))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses, accuracies, w_grads = [], [], []
    scales = initial_scales(model, batches[0][0], variant)
    for x, y in batches:
        lengths, rec = forward(model, x, y, variant)
        loss = loss_of(lengths, rec, x, y, variant)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        w_grads.append(model.digits.W.grad.norm().item())
        opt.step()
        losses.append(loss.item())
        accuracies.append(100.0 * (lengths.argmax(1) == y).float().mean().item())
    return {"loss": losses, "accuracy": accuracies, "w_grad": w_grads, "scales": scales}


def report_row(name: str, result: dict) -> str:
    acc = result["accuracy"]
    cells = " ".join(f"{acc[s]:5.1f}" if s < len(acc) else "    -" for s in REPORT_STEPS)
    sc = result["scales"]
    return f"{name:22s} {result['loss'][0]:7.4f} {cells}   |u| {sc['u']:.3f} |u_hat| {sc['u_hat']:.4f} |v| {sc['v']:.4f} |dW|0 {result['w_grad'][0]:.2e}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="capsnet", help="a capsnet preset")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, from: {', '.join(VARIANTS)}, or w_std=<float>")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    batches = fixed_batches(args.steps, seed=args.seed, data_dir=args.data_dir)
    print(f"{args.model}, seed {args.seed}, {args.steps} batches of 128, Adam lr 1e-3, no augmentation")
    print(f"{'variant':22s} {'loss0':>7s} " + " ".join(f"{'@' + str(s):>5s}" for s in REPORT_STEPS) + "   (batch accuracy %)")
    for name in args.variants.split(","):
        t0 = time.perf_counter()
        result = run_variant(variant(name), batches, model_name=args.model, seed=args.seed)
        print(report_row(name, result) + f"  ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
