"""The small measurements behind BENCH.md's "What keeps a move this cheap", side by side in one run:

    python tests/load/micro.py

- a 10-line chart built as a validated go.Figure and as plotly.js's own dict (viz.lines.spec);
- a 1,152-cell heatmap with its hover names written to JSON by json and by orjson;
- the explorer's perturbation grid encoded as PNG: colour at Pillow's default level 6, and grey at
  level 1 (capsviz.viz.png_bytes);
- one paper CapsNet forward pass (one image) with one torch thread and with two, in CPU time,
  each in a fresh process: run it on a busy machine as well as a quiet one.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from st_helpers import cpu_name  # noqa: E402


def per_call(f, n: int = 20) -> float:
    """Milliseconds a call, the best of three rounds of n."""
    f()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            f()
        best = min(best, (time.perf_counter() - t) / n)
    return 1000 * best


def charts() -> None:
    import plotly.graph_objects as go

    from capsviz.viz import lines

    y, names = np.random.default_rng(0).random((3, 10)), [str(k) for k in range(10)]
    print(
        f"10-line chart: go.Figure {per_call(lambda: lines(y, names, 't', 'x', 'y')):.2f} ms, "
        f"its dict {per_call(lambda: lines.spec(y, names, 't', 'x', 'y')):.3f} ms, "
        f"a go.Figure from the dict {per_call(lambda: go.Figure(lines.spec(y, names, 't', 'x', 'y'))):.2f} ms"
    )


def chart_json() -> None:
    import plotly.graph_objects as go
    import plotly.io as pio

    z = np.random.default_rng(0).random((32, 36))
    hover = [[f"type {k + 1} at row {p // 6 + 1}, col {p % 6 + 1}" for p in range(36)] for k in range(32)]
    fig = go.Figure(go.Heatmap(z=z, customdata=hover, hovertemplate="%{customdata}: %{z:.3f}")).to_dict()
    took = {}
    for engine in ("json", "orjson"):
        pio.json.config.default_engine = engine
        took[engine] = per_call(lambda: pio.to_json(fig, validate=False), 50)
    print(f"1,152-cell heatmap to JSON: json {took['json']:.2f} ms, orjson {took['orjson']:.3f} ms")


def grid_png() -> None:
    import torch

    from capsviz.analysis import STEPS, perturbation_grid
    from capsviz.model_cache import ModelCache
    from capsviz.viz import png_bytes
    from capsviz.viz.explain import labelled_grid

    torch.set_grad_enabled(False)
    model, _ = ModelCache().get(ROOT / "checkpoints" / "capsnet-mnist.safetensors")
    v = torch.zeros(16)
    v[0] = 0.9
    grid = perturbation_grid(model, v.numpy(), 3)
    img = labelled_grid(grid, [f"d{d}" for d in range(16)], [f"{s:+.2f}" for s in STEPS], scale=2, title="capsule 3")

    def default() -> bytes:
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()

    print(
        f"perturbation grid {img.size[0]}x{img.size[1]} as PNG: colour, level 6 {per_call(default, 10):.1f} ms; "
        f"png_bytes (grey, level 1) {per_call(lambda: png_bytes(img), 10):.1f} ms"
    )


FORWARD = """
import sys, time, torch
from pathlib import Path
sys.path.insert(0, {root!r})
torch.set_num_threads({threads}); torch.set_grad_enabled(False)
from capsviz.model_cache import ModelCache
from capsviz.analysis import predict
import numpy as np
model, _ = ModelCache().get(Path({root!r}) / "checkpoints" / "capsnet-mnist.safetensors")
image = np.random.default_rng(0).random((28, 28)).astype(np.float32)
for _ in range(3): predict(model, image)
c = time.process_time()
for _ in range(20): predict(model, image)
print(1000 * (time.process_time() - c) / 20)
"""


def forward_threads() -> None:
    took = {}
    for threads in (1, 2):
        out = subprocess.run(
            [sys.executable, "-c", FORWARD.format(root=str(ROOT), threads=threads)],
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": str(threads)},
            check=True,
        )
        took[threads] = float(out.stdout.strip().splitlines()[-1])
    print(
        f"paper CapsNet, one image, CPU time: 1 torch thread {took[1]:.1f} ms, 2 threads {took[2]:.1f} ms (load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    print(f"{cpu_name()}, {os.cpu_count()} cores")
    charts()
    chart_json()
    grid_png()
    forward_threads()
