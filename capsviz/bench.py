"""`python -m capsviz bench`: training and inference speed, batch-1 latency, routing time and
peak memory per model preset. Each preset is measured in a fresh process so peaks don't mix."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import torch

from capsviz.config import PRESETS, preset
from capsviz.devices import autocast, describe_hardware, pick_device
from capsviz.families.matrix_capsnet.config import MatrixCapsConfig
from capsviz.i18n import language, t
from capsviz.kernels import compile_em
from capsviz.models import build_model, count_parameters
from capsviz.routing import dynamic_routing_ji
from capsviz.train import objective

TRAIN_BATCH, INFER_BATCH = 128, 256


def _time(fn, steps: int, device) -> float:
    fn()  # warm-up
    _sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    _sync(device)
    return (time.perf_counter() - start) / steps


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def _peak_mb(device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    # VmHWM: this process image's own peak. ru_maxrss survives exec, so a preset measured in a
    # subprocess would report at least the parent's size at the fork (1.1 GB under pytest).
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024  # kB
    except (OSError, StopIteration, ValueError):
        pass
    try:
        import resource  # Unix only: imported here so the Train page (which imports bench) loads on Windows
    except ImportError:
        return float("nan")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB elsewhere


def train_step_seconds(model, batch: int, device, precision: str = "fp32", steps: int = 3, two_labels: bool = False) -> float:
    """Seconds per training step (forward, the family's loss, backward, Adam) on random inputs,
    after one warm-up step. `two_labels`: MultiMNIST targets. The model is left in train mode."""
    cfg = model.config
    x = torch.rand(batch, cfg.in_channels, cfg.in_size, cfg.in_size, device=device)
    if two_labels:
        y = torch.stack([torch.zeros(batch, dtype=torch.long), torch.ones(batch, dtype=torch.long)], 1).to(device)
    else:
        y = torch.randint(0, cfg.num_classes, (batch,), device=device)
    target = x.expand(batch, 2, cfg.in_size, cfg.in_size) if two_labels else x  # MultiMNIST: one image per digit
    opt = torch.optim.Adam(model.parameters(), 1e-3)

    def step():
        with torch.enable_grad(), autocast(device, precision):
            loss = objective(model, model(x, y), target, y, 0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()

    model.train()
    return _time(step, steps, device)


def bench_config(name: str, iterations: int | None = None):
    """The preset as capsviz trains it. Matrix presets default to the paper's smallNORB geometry
    (32x32 crops, 5 classes), but capsviz trains them on MNIST: they are measured at 28x28 with
    10 classes, the input issue 2's targets name. `iterations` overrides the routing iterations
    of the families that iterate (CapsNet, matrix capsules; Efficient-CapsNet routes in one pass)."""
    cfg = PRESETS[name]
    over = {"in_size": 28, "num_classes": 10} if isinstance(cfg, MatrixCapsConfig) else {}
    if iterations is not None and hasattr(cfg, "routing_iterations"):
        over["routing_iterations"] = iterations
    return preset(name, **over)


def measure(
    name: str, device_name: str = "auto", precision: str = "fp32", steps: int = 3, compile: bool = False, iterations: int | None = None
) -> dict:
    device = pick_device(device_name)
    torch.manual_seed(0)
    cfg = bench_config(name, iterations)
    model = build_model(cfg).to(device)
    if compile and cfg.routing == "em":  # as in training: the EM core is compiled, not the model around it
        compile_em()
    elif compile:
        model = torch.compile(model)
    S = cfg.in_size
    base_mb = _peak_mb(device)
    t_train = train_step_seconds(model, TRAIN_BATCH, device, precision, steps)
    peak_train = _peak_mb(device)
    model.eval()
    xi = torch.rand(INFER_BATCH, cfg.in_channels, S, S, device=device)
    x1 = xi[:1]
    with torch.inference_mode(), autocast(device, precision):
        t_infer = _time(lambda: model(xi), steps, device)
        t_one = _time(lambda: model(x1), max(10, steps), device)
        t_route = None
        if cfg.routing == "dynamic":
            u_hat = model.predictions(xi)
            t_route = _time(lambda: dynamic_routing_ji(u_hat, cfg.routing_iterations), steps, device)
    return {
        "model": name,
        "family": cfg.family,
        "in_size": S,
        "routing_iterations": getattr(cfg, "routing_iterations", None),
        "parameters": count_parameters(model),
        "device": describe_hardware(device),
        "precision": precision,
        "train_images_per_s": TRAIN_BATCH / t_train,
        "infer_images_per_s": INFER_BATCH / t_infer,
        "latency_ms": 1000 * t_one,
        "routing_ms_per_image": None if t_route is None else 1000 * t_route / INFER_BATCH,
        "peak_train_mb": peak_train,
        "baseline_mb": base_mb,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "compiled": compile,
    }


def run_all(names: list[str], device: str, precision: str, steps: int, compile: bool = False, iterations: int | None = None) -> list[dict]:
    out = []
    for name in names:
        cmd = [sys.executable, "-m", "capsviz", "--lang", language(), "bench", "--one", name, "--device", device, "--precision", precision]
        cmd += ["--steps", str(steps)]
        cmd += ["--compile"] if compile else []
        cmd += ["--routing-iterations", str(iterations)] if iterations is not None else []
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            out.append({"model": name, "error": (r.stderr.strip().splitlines() or [t("failed")])[-1]})
        else:
            out.append(json.loads(r.stdout.strip().splitlines()[-1]))
        print(t("measured {name}", name=name), file=sys.stderr, flush=True)
    return out


def table(results: list[dict]) -> str:
    """The results as a table; its column heads stay English (units and short names, lined up in
    fixed-width columns, as BENCH.md keeps them), the lines around them in the reader's language."""
    head = f"{'model':20} {'input':>5} {'iters':>5} {'params':>10} {'train img/s':>12} {'infer img/s':>12} {'batch-1 ms':>11} {'routing ms/img':>15} {'peak train MB':>14}"
    lines = [head, "-" * len(head)]
    for r in results:
        if "error" in r:
            lines.append(t("{model} error: {why}", model=f"{r['model']:20}", why=r["error"]))
            continue
        route = f"{r['routing_ms_per_image']:.3f}" if r["routing_ms_per_image"] is not None else "-"
        lines.append(
            f"{r['model']:20} {r.get('in_size', ''):>5} {r.get('routing_iterations') or '-':>5} {r['parameters']:>10,} {r['train_images_per_s']:>12.1f} {r['infer_images_per_s']:>12.1f} {r['latency_ms']:>11.2f} {route:>15} {r['peak_train_mb']:>14.0f}"
        )
    if results and "device" in results[0]:
        r = results[0]
        said = dict(device=r["device"], precision=r["precision"], torch=r["torch"], threads=r["threads"])
        if r.get("compiled"):
            lines.append(t("device: {device}, precision {precision}, torch {torch}, {threads} threads, compiled", **said))
        else:
            lines.append(t("device: {device}, precision {precision}, torch {torch}, {threads} threads", **said))
    return "\n".join(lines)


def convolutions(steps: int = 3, batches: tuple[int, ...] = (8, 16, 32, 64, 128), names: list[str] | None = None) -> list[dict]:
    """PrimaryCaps' convolution of each CapsNet preset, float32 on the CPU, timed both ways per
    batch size: the im2col GEMM and the Fourier-domain product (`capsviz.kernels.fourier`), forward
    alone and forward + backward, and which one the kernel policy picks. The evidence for
    `capsviz.kernels.policy.MIN_BATCH`."""
    from capsviz.kernels import policy

    rows = []
    for name in names or [n for n, c in PRESETS.items() if c.routing == "dynamic"]:
        cfg = PRESETS[name]
        H, C, O, k = cfg.in_size - cfg.conv1_kernel + 1, cfg.conv1_channels, cfg.primary_types * cfg.primary_dim, cfg.primary_kernel
        w = torch.randn(O, C, k, k, requires_grad=True)
        for B in batches:
            x = torch.rand(B, H, H, C, requires_grad=True)
            row = {"model": name, "input": f"{H}x{H}x{C}", "out_channels": O, "batch": B}
            row["picked"] = policy.conv_path(x, w, 2)
            for way in ("im2col", "fourier"):
                row[f"{way}_forward_ms"], row[f"{way}_train_ms"] = _convolution_ms(way, x, w, steps)
            rows.append(row)
    return rows


def _convolution_ms(way: str, x: torch.Tensor, w: torch.Tensor, steps: int) -> tuple[float, float]:
    from capsviz.kernels import fourier
    from capsviz.kernels.gemm import Im2colConv, gemm_layout

    def conv():
        if way == "fourier":
            return fourier.conv2d(x, w, 2)
        return Im2colConv.apply(x, gemm_layout(w, torch.float32), w.shape[-1], 2)

    cpu = torch.device("cpu")
    with torch.no_grad():
        forward = _time(conv, steps, cpu)
    train = _time(lambda: conv().sum().backward(), steps, cpu)
    return 1000 * forward, 1000 * train


def convolution_table(rows: list[dict]) -> str:
    head = f"{'model':20} {'input':>10} {'batch':>5} {'forward ms im2col / fourier':>28} {'fwd+bwd ms im2col / fourier':>28}  picked"
    lines = [head, "-" * len(head)]
    for r in rows:
        forward = f"{r['im2col_forward_ms']:.1f} / {r['fourier_forward_ms']:.1f}"
        both = f"{r['im2col_train_ms']:.1f} / {r['fourier_train_ms']:.1f}"
        lines.append(f"{r['model']:20} {r['input']:>10} {r['batch']:>5} {forward:>28} {both:>28}  {r['picked']}")
    lines.append(
        t(
            "device: {device}, float32, torch {torch}, {threads} threads",
            device=describe_hardware(torch.device("cpu")),
            torch=torch.__version__,
            threads=torch.get_num_threads(),
        )
    )
    return "\n".join(lines)


def capsnet_step_parts(name: str = "capsnet", steps: int = 3) -> dict[str, float]:
    """Milliseconds per part of one float32 CPU training step of a CapsNet preset at batch 128,
    each part timed alone (forward + backward): Conv1, PrimaryCaps, DigitCaps with routing (as
    training slices it), the decoder, the Adam update."""
    import torch.nn.functional as F

    from capsviz.kernels.slices import in_chunks

    cpu, B = torch.device("cpu"), TRAIN_BATCH
    torch.manual_seed(0)
    m = build_model(bench_config(name)).train()
    x, y = torch.rand(B, 1, m.config.in_size, m.config.in_size), torch.randint(0, m.config.num_classes, (B,))
    h = m.features(x).detach().requires_grad_()
    u = m.primary(h).detach().requires_grad_()
    route = lambda u: dynamic_routing_ji(m.digits(u), m.config.routing_iterations).v  # noqa: E731
    chunk, keep = m.routing_slices(u)
    v = in_chunks(route, u, chunk=chunk, keep=keep).detach().requires_grad_()
    mask = F.one_hot(y, m.config.num_classes).float()
    opt = torch.optim.Adam(m.parameters(), 1e-3)
    parts = {
        "conv1": lambda: m.features(x).sum().backward(),
        "primary": lambda: m.primary(h).sum().backward(),
        "routing": lambda: in_chunks(route, u, chunk=chunk, keep=keep).norm(dim=-1).sum().backward(),
        "decoder": lambda: m.decoder(v, mask).sum().backward(),
        "adam": opt.step,
    }
    return {part: 1000 * _time(fn, steps, cpu) for part, fn in parts.items()}


def page_sweeps(folder) -> list[tuple[str, float]]:
    """Seconds each sweep behind a page's button takes at the page's defaults, with the shipped
    models and the real test sets: MultiMNIST accuracy (1,000 pairs), FGSM and BIM (100 images, the
    page's 7 epsilons) for each shipped capsule model and the baseline CNN, the affine sweep (500
    images, both models)."""
    from pathlib import Path

    import numpy as np

    from capsviz.analysis.multimnist import pair_accuracy
    from capsviz.analysis.robustness import affine_sweep, attack_sweep
    from capsviz.checkpoint import load_checkpoint
    from capsviz.data import load_split

    torch.set_grad_enabled(False)
    model = {
        n: load_checkpoint(Path(folder) / f"{n}.safetensors")[0]
        for n in ("capsnet-multimnist", "capsnet-mnist", "matrix-small-mnist", "cnn-small-mnist")
    }
    out = []

    def timed(name, fn):
        start = time.perf_counter()
        fn()
        out.append((name, time.perf_counter() - start))

    pairs = load_split("multimnist", "test")
    timed(t("MultiMNIST accuracy, {n} pairs", n=1000), lambda: pair_accuracy(model["capsnet-multimnist"], pairs.images, pairs.labels, 1000))
    mnist = load_split("mnist", "test")
    x, y = mnist.images[:100].float().div(255).unsqueeze(1), mnist.labels[:100]
    epsilons = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3]
    for name in ("capsnet-mnist", "matrix-small-mnist", "cnn-small-mnist"):
        for method in ("fgsm", "bim"):
            timed(
                t("{method} {model}, {n} images", method=method.upper(), model=name, n=100),
                lambda m=model[name], k=method: attack_sweep(m, x, y, epsilons, method=k),
            )
    both = {n: model[n] for n in ("capsnet-mnist", "cnn-small-mnist")}
    strengths = np.round(np.arange(0, 2.01, 0.25), 2)
    timed(
        t("affine sweep, {n} images, {models}", n=500, models=" + ".join(both)),
        lambda: affine_sweep(both, mnist.images[:500], mnist.labels[:500], 28, strengths),
    )
    return out
