"""Animated GIFs of routing iterations for slides: PIL frames in, GIF bytes out."""

from __future__ import annotations

import io

from PIL import Image

from capsviz.analysis.playground import DynamicToy, EMToy
from capsviz.viz.teach import dynamic_frame, em_frame


def gif_bytes(frames: list[Image.Image], ms_per_frame: int = 1200, last_ms: int = 2500) -> bytes:
    """Frames (any sizes; pasted on a white canvas of the largest) -> a looping GIF. The last frame
    stays up longer: it is the result the iterations lead to."""
    if not frames:
        raise ValueError("a GIF needs at least one frame")
    W, H = max(f.width for f in frames), max(f.height for f in frames)
    canvas = []
    for f in frames:
        c = Image.new("RGB", (W, H), "white")
        c.paste(f.convert("RGB"), (0, 0))
        # one adaptive palette per frame: the figures use few colours, and a shared web palette bands the alpha shades
        canvas.append(c.quantize(colors=255, method=Image.Quantize.MEDIANCUT))
    durations = [ms_per_frame] * (len(frames) - 1) + [last_ms]
    buf = io.BytesIO()
    canvas[0].save(buf, format="GIF", save_all=True, append_images=canvas[1:], duration=durations, loop=0, disposal=1)
    return buf.getvalue()


def dynamic_frames(toy: DynamicToy, names: list[str] | None = None) -> list[Image.Image]:
    T = toy.iterations
    return [
        dynamic_frame(toy.u_hat, toy.c[t], toy.s[t], toy.v[t], f"Routing by agreement: iteration {t + 1} of {T}", names) for t in range(T)
    ]


def em_frames(toy: EMToy, names: list[str] | None = None) -> list[Image.Image]:
    T = toy.iterations
    return [
        em_frame(
            toy.votes,
            toy.R[t],
            toy.mu[t],
            toy.sigma[t],
            toy.a[t],
            f"EM routing: iteration {t + 1} of {T} (lambda = {toy.lambdas[t]:.2f})",
            names,
        )
        for t in range(T)
    ]
