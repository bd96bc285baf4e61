"""Figures for the EM, explorer and MultiMNIST pages drawn with PIL: numpy in, PIL image out.

Images rather than plotly charts for the same reason as capsviz.viz.teach: the figure on screen is
the PNG a teacher downloads and a frame of the GIF."""

from __future__ import annotations

import numpy as np
from PIL import Image

from capsviz.analysis.explain import panel_order
from capsviz.analysis.routing import EMTrace, vote_histograms
from capsviz.i18n import N_, t
from capsviz.viz import to_image
from capsviz.viz.teach import GREY, INK, _canvas, font

WINNER = (214, 39, 40)
OTHER = (120, 140, 170)


def _histogram(d, x0: float, y0: float, pw: int, ph: int, counts: np.ndarray, limit: float, ymax: float, winner: bool) -> None:
    """One R-weighted vote-distance histogram in the box at (x0, y0), pw x ph: bars up to `ymax`,
    ticks at 0, the middle and `limit` under it; the winner's in red with a red frame."""
    d.rectangle([x0, y0, x0 + pw, y0 + ph], outline=WINNER if winner else (205, 205, 205), width=2 if winner else 1)
    bw = pw / len(counts)
    for i, v in enumerate(counts):
        h = ph * min(float(v) / max(ymax, 1e-12), 1.0)
        if h > 0:
            d.rectangle([x0 + i * bw, y0 + ph - h, x0 + (i + 1) * bw - 1, y0 + ph], fill=WINNER if winner else OTHER)
    for frac in (0, 0.5, 1):
        tx = x0 + frac * pw
        d.line([tx, y0 + ph, tx, y0 + ph + 4], fill=GREY)
        text = f"{frac * limit:.3g}"
        d.text(
            (tx - (0 if frac == 0 else d.textlength(text, font=font(12)) / (2 if frac < 1 else 1)), y0 + ph + 5),
            text,
            fill=GREY,
            font=font(12),
        )


def histogram_panels(
    counts: np.ndarray,
    limit: float,
    names,
    order: list[int],
    title: str,
    notes: list[str],
    ymax: float,
    columns: int = 5,
) -> Image.Image:
    """Small multiples of R-weighted vote-distance histograms: one panel per class capsule in
    `order` (the first, the winner, in red with a red frame), all on one y scale `ymax` so the
    panels compare. counts (J, nbins) over [0, limit]; notes: one line under each panel's name."""
    J, nb = counts.shape
    pw, ph, gap, head = 200, 120, 16, 62
    rows = -(-J // columns)
    W = 50 + columns * (pw + gap)
    H = head + rows * (ph + 62) + 30
    img, d = _canvas(W, H)
    d.text((12, 8), title, fill=INK, font=font(19))
    d.text(
        (12, 32),
        t("{key} (same height scale in every panel, top = {top})", key=t(HISTOGRAM_KEY), top=f"{ymax:.3g}"),
        fill=GREY,
        font=font(13),
    )
    for k, j in enumerate(order):
        r, c = divmod(k, columns)
        x0, y0 = 40 + c * (pw + gap), head + 34 + r * (ph + 62)
        label = t("class {name} (winner)", name=names[j]) if k == 0 else t("class {name}", name=names[j])
        d.text((x0, y0 - 36), label, fill=WINNER if k == 0 else INK, font=font(16))
        d.text((x0, y0 - 17), notes[k], fill=INK, font=font(12))
        _histogram(d, x0, y0, pw, ph, counts[j], limit, ymax, k == 0)
    d.text((40, H - 22), t("x axis: {axis}", axis=t(HISTOGRAM_X)), fill=INK, font=font(13))
    return img


HISTOGRAM_KEY = N_("each bar: the sum of assignments R of the votes at that distance from the class capsule's mean pose")
HISTOGRAM_X = N_("distance from a vote to the class capsule's mean pose (0 = the vote agrees exactly)")
PANEL_WIDTH = 160  # px: two side by side on a phone (390 px), four on a laptop's page


def histogram_panel(counts: np.ndarray, limit: float, name: str, notes: list[str], ymax: float, winner: bool) -> Image.Image:
    """One class capsule's panel of `histogram_panels` on its own, PANEL_WIDTH px wide, to be shown
    at its own size: a page lays the panels out in as many columns as the screen holds, so each
    stays readable on a phone. notes: short lines under its name."""
    pw, ph, x0 = PANEL_WIDTH - 20, 90, 10
    y0 = 8 + 20 + 16 * len(notes) + 4
    img, d = _canvas(PANEL_WIDTH, y0 + ph + 24)
    d.text(
        (x0, 6),
        t("class {name} (winner)", name=name) if winner else t("class {name}", name=name),
        fill=WINNER if winner else INK,
        font=font(15),
    )
    for k, line in enumerate(notes):
        d.text((x0, 28 + 16 * k), line, fill=INK, font=font(12))
    _histogram(d, x0, y0, pw, ph, counts, limit, ymax, winner)
    return img


def em_histograms(trace: EMTrace, limit: float, names, it: int, nbins: int = 40) -> tuple[str, list[Image.Image]]:
    """Iteration `t` of `em_histogram_frames` as its title and one panel per class capsule (the
    winner first), on the frames' one height scale, for a page that lays the panels out itself."""
    counts, order, ymax = _vote_counts(trace, limit, nbins)
    mass = trace.R.sum(1)
    panels = [
        histogram_panel(
            counts[it, j],
            limit,
            str(names[j]),
            [t("activation {a}", a=f"{trace.a[it, j]:.2f}"), t("total R {mass}", mass=f"{mass[it, j]:.1f}")],
            ymax,
            k == 0,
        )
        for k, j in enumerate(order)
    ]
    title = t(
        "EM iteration {k} of {T}: R-weighted vote distances per class capsule, distances 0 to {limit}; same height scale in "
        "every panel, top = {top}",
        k=it + 1,
        T=len(trace.R),
        limit=f"{limit:g}",
        top=f"{ymax:.3g}",
    )
    return title, panels


def _vote_counts(trace: EMTrace, limit: float, nbins: int) -> tuple[np.ndarray, list[int], float]:
    """(T, J, nbins) histograms over [0, limit], the panels' order (by final activation, the
    winner first) and the one height scale over all iterations."""
    counts = vote_histograms(trace, np.linspace(0, limit, nbins + 1))
    return counts, panel_order(trace.a[-1]), float(counts.max())


def _histogram_title(it: int, T: int, limit: float) -> str:
    return t(
        "EM iteration {k} of {T}: R-weighted vote distances per class capsule, distances 0 to {limit}", k=it + 1, T=T, limit=f"{limit:g}"
    )


def em_histogram_frames(trace: EMTrace, limit: float, names, it: int | None = None, nbins: int = 40) -> list[Image.Image]:
    """Fig. 2's histograms as small multiples for every EM iteration (the GIF's frames), or only
    iteration `it`: distances 0 to `limit`, panels by final activation (the winner first), one
    height scale over all iterations so the frames compare."""
    counts, order, ymax = _vote_counts(trace, limit, nbins)
    mass = trace.R.sum(1)  # (T, J): sum_i R_ij
    T = len(trace.R)
    frames = []
    for k in range(T) if it is None else [it]:
        notes = [t("activation {a} · total R {mass}", a=f"{trace.a[k, j]:.2f}", mass=f"{mass[k, j]:.1f}") for j in order]
        frames.append(histogram_panels(counts[k], limit, names, order, _histogram_title(k, T, limit), notes, ymax))
    return frames


def labelled_grid(grid: np.ndarray, rows: list[str], columns: list[str], scale: int = 2, gap: int = 2, title: str = "") -> Image.Image:
    """(R, C, H, W) or (R, C, 3, H, W) images in [0, 1] tiled, each row named at the left and each
    column on top (the perturbation grid: dimensions x offsets)."""
    R, C = grid.shape[:2]
    H, W = grid.shape[-2:]
    f = font(16)  # the page shows the grid narrower than drawn: labels that still read there
    left, top = 56, 60 if title else 30
    tile_w, tile_h = W * scale, H * scale
    img, d = _canvas(left + C * (tile_w + gap) + 6, top + R * (tile_h + gap) + 6)
    if title:
        d.text((6, 4), title, fill=INK, font=font(18))
    for c, name in enumerate(columns):
        x = left + c * (tile_w + gap) + tile_w / 2 - d.textlength(name, font=f) / 2
        d.text((x, top - 22), name, fill=INK, font=f)
    for r, name in enumerate(rows):
        y = top + r * (tile_h + gap)
        d.text((6, y + tile_h / 2 - 9), name, fill=INK, font=f)
        for c in range(C):
            tile = to_image(grid[r, c], scale)
            img.paste(tile.convert("RGB"), (left + c * (tile_w + gap), y))
    return img


def coupling_overlays(
    inputs: list[np.ndarray],
    maps: np.ndarray,
    group_names: list[str],
    row_names: list[str],
    low: float,
    high: float,
    title: str,
    scale: int = 4,
) -> Image.Image:
    """Coupling maps laid over their input: one block per input (side by side), one row per upper
    capsule, one column per routing iteration, all on one colour scale: no red at `low` (uniform),
    full red at `high` and above; the scale is written under the figure (`coupling_scale_words`).
    inputs: one (H, W) image per block; maps (blocks, rows, T, G, G)."""
    blocks, rows, T = maps.shape[:3]
    H, W = inputs[0].shape
    tw, th, gap, left, top = W * scale, H * scale, 8, 110, 82
    block_w = T * (tw + gap) + 24
    img, d = _canvas(left + blocks * block_w + 10, top + rows * (th + gap) + 50)
    d.text((10, 8), title, fill=INK, font=font(17))
    for k in range(blocks):
        _coupling_block(img, d, left + k * block_w, top, inputs[k], maps[k], group_names[k], low, high, scale)
    for r in range(rows):
        for n, line in enumerate(row_names[r].split("\n")):
            d.text((10, top + r * (th + gap) + 10 + 18 * n), line, fill=INK, font=font(14))
    d.text(
        (10, top + rows * (th + gap) + 8), coupling_scale_words(low, high, maps.shape[-1]).replace("; ", ".\n", 1), fill=INK, font=font(13)
    )
    return img


def coupling_scale_words(low: float, high: float, grid: int) -> str:
    """What the colours of `coupling_overlays` mean."""
    return t(
        "colour: no red = coupling {low} (uniform, an even split) or less; full red = {high} or more; each {grid} x {grid} map "
        "(one value per primary-capsule position, mean over capsule types) is stretched over the input.",
        low=f"{low:.3f}",
        high=f"{high:.3f}",
        grid=grid,
    )


def coupling_block(
    image: np.ndarray, maps: np.ndarray, name: str, row_names: list[str], low: float, high: float, scale: int = 3
) -> Image.Image:
    """One input's block of `coupling_overlays` on its own, its rows named inside it: maps (rows,
    T, G, G). A page shows the blocks side by side where they fit and one under the other on a
    phone, each at a size that stays readable there; the scale goes in the page's caption."""
    rows, T = maps.shape[:2]
    H, W = image.shape
    tw, th, gap, left, top = W * scale, H * scale, 6, 96, 54
    img, d = _canvas(left + T * (tw + gap) + 4, top + rows * (th + gap))
    _coupling_block(img, d, left, top, image, maps, name, low, high, scale, gap)
    for r in range(rows):
        for n, line in enumerate(row_names[r].split("\n")):
            d.text((6, top + r * (th + gap) + 8 + 17 * n), line, fill=INK, font=font(13))
    return img


def _coupling_block(img, d, x0: int, top: int, image, maps, name: str, low: float, high: float, scale: int, gap: int = 8) -> None:
    """One input's maps (rows, T, G, G) over it, the block's name and iteration numbers above."""
    rows, T = maps.shape[:2]
    H, W = image.shape
    tw, th = W * scale, H * scale
    span = max(high - low, 1e-12)
    d.text((x0, top - 46), name, fill=INK, font=font(16))
    g = np.clip(image, 0, 1) * 0.6
    for it in range(T):
        d.text((x0 + it * (tw + gap) + 4, top - 20), t("iteration {k}", k=it + 1), fill=GREY, font=font(14))
    for r in range(rows):
        y = top + r * (th + gap)
        for it in range(T):
            heat = np.asarray(Image.fromarray(maps[r, it].astype(np.float32)).resize((W, H), Image.BILINEAR))
            h = np.clip((heat - low) / span, 0, 1)
            rgb = np.stack([np.maximum(g, h), g * (1 - h), g * (1 - h)], -1)
            tile = Image.fromarray((rgb * 255).astype(np.uint8), "RGB").resize((tw, th), Image.NEAREST)
            img.paste(tile, (x0 + it * (tw + gap), y))
