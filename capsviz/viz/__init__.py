"""Figure builders: numpy in, plotly figure or PIL image out. No Streamlit here."""

from __future__ import annotations

import io

import numpy as np
import plotly.graph_objects as go
from PIL import Image


def to_image(a: np.ndarray, scale: int = 6) -> Image.Image:
    """(H, W) in [0, 1] -> an upscaled greyscale PIL image (nearest: pixels stay visible)."""
    img = Image.fromarray((np.clip(a, 0, 1) * 255).astype(np.uint8), "L")
    return img.resize((a.shape[1] * scale, a.shape[0] * scale), Image.NEAREST)


def grid_image(grid: np.ndarray, scale: int = 2, gap: int = 1) -> Image.Image:
    """(rows, cols, H, W) -> one tiled image, rows top to bottom."""
    R, C, H, W = grid.shape
    canvas = np.ones((R * (H + gap) - gap, C * (W + gap) - gap), np.float32)
    for r in range(R):
        for c in range(C):
            canvas[r * (H + gap) : r * (H + gap) + H, c * (W + gap) : c * (W + gap) + W] = grid[r, c]
    return to_image(canvas, scale)


def png_bytes(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def capsule_bars(scores: np.ndarray, names, predicted: int, title: str) -> go.Figure:
    colors = ["#d62728" if i == predicted else "#7f7f7f" for i in range(len(scores))]
    fig = go.Figure(
        go.Bar(x=[str(n) for n in names], y=scores, marker_color=colors, text=[f"{s:.2f}" for s in scores], textposition="outside")
    )
    fig.update_layout(title=title, yaxis=dict(range=[0, 1.1], title="capsule length"), height=300, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def squash_curve() -> go.Figure:
    n = np.linspace(0, 5, 200)
    fig = go.Figure(go.Scatter(x=n, y=n**2 / (1 + n**2), name="|v| = |s|^2 / (1 + |s|^2)"))
    fig.add_trace(go.Scatter(x=n, y=np.minimum(n, 1), name="|s| (clipped at 1)", line=dict(dash="dot")))
    fig.update_layout(
        xaxis_title="|s| (length before squash)", yaxis_title="|v| (length after)", height=280, margin=dict(l=10, r=10, t=10, b=10)
    )
    return fig


def effect_bars(effect: np.ndarray) -> go.Figure:
    fig = go.Figure(go.Bar(x=[f"d{i}" for i in range(len(effect))], y=effect))
    fig.update_layout(
        title="How much each dimension changes the image (-0.25 vs +0.25)",
        yaxis_title="mean |pixel change|",
        height=260,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return fig


def curves(points: list[dict], y: str, title: str) -> go.Figure:
    fig = go.Figure(go.Scatter(x=[p["step"] for p in points], y=[p[y] for p in points], mode="lines"))
    fig.update_layout(title=title, xaxis_title="step", height=260, margin=dict(l=10, r=10, t=40, b=10))
    return fig
