"""Figures for the EM, explorer and MultiMNIST pages drawn with PIL: numpy in, PIL image out.

Images rather than plotly charts for the same reason as capsviz.viz.teach: the figure on screen is
the PNG a teacher downloads and a frame of the GIF."""

from __future__ import annotations

import numpy as np
from PIL import Image

from capsviz.analysis.explain import panel_order
from capsviz.analysis.routing import EMTrace, vote_histograms
from capsviz.i18n import N_, t
from capsviz.i18n import gap as joined_by
from capsviz.viz import to_image
from capsviz.viz.teach import GREY, INK, _canvas, draw_lines, font, line_height, wrap

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
    pw, ph, gap = 200, 120, 16
    rows = -(-J // columns)
    W = 50 + columns * (pw + gap)
    titled = wrap(title, font(19), W - 24)
    keyed = wrap(t("{key} (same height scale in every panel, top = {top})", key=t(HISTOGRAM_KEY), top=f"{ymax:.3g}"), font(13), W - 24)
    axis = wrap(t("x axis: {axis}", axis=t(HISTOGRAM_X)), font(13), W - 50)
    labels = [
        wrap(t("class {name} (winner)", name=names[j]) if k == 0 else t("class {name}", name=names[j]), font(16), pw)
        for k, j in enumerate(order)
    ]
    said = [wrap(n, font(12), pw) for n in notes]
    above = max(len(a) * line_height(font(16)) + len(b) * line_height(font(12)) for a, b in zip(labels, said, strict=True)) + 2
    head = 8 + len(titled) * line_height(font(19)) + len(keyed) * line_height(font(13)) + 8
    cell = above + ph + 24  # a panel: its name and notes, the histogram, the ticks under it
    H = head + rows * cell + len(axis) * line_height(font(13)) + 10
    img, d = _canvas(W, H)
    y = 8 + draw_lines(d, (12, 8), titled, font(19), INK)
    draw_lines(d, (12, y), keyed, font(13), GREY)
    for k, j in enumerate(order):
        r, c = divmod(k, columns)
        x0, y0 = 40 + c * (pw + gap), head + r * cell + above
        under = y0 - 2 - len(said[k]) * line_height(font(12))
        draw_lines(d, (x0, under - len(labels[k]) * line_height(font(16))), labels[k], font(16), WINNER if k == 0 else INK)
        draw_lines(d, (x0, under), said[k], font(12), INK)
        _histogram(d, x0, y0, pw, ph, counts[j], limit, ymax, k == 0)
    draw_lines(d, (40, head + rows * cell + 4), axis, font(13), INK)
    return img


HISTOGRAM_KEY = N_("each bar: the sum of assignments R of the votes at that distance from the class capsule's mean pose")
HISTOGRAM_X = N_("distance from a vote to the class capsule's mean pose (0 = the vote agrees exactly)")
PANEL_WIDTH = 160  # px: two side by side on a phone (390 px), four on a laptop's page


def histogram_panel(counts: np.ndarray, limit: float, name: str, notes: list[str], ymax: float, winner: bool) -> Image.Image:
    """One class capsule's panel of `histogram_panels` on its own, PANEL_WIDTH px wide, to be shown
    at its own size: a page lays the panels out in as many columns as the screen holds, so each
    stays readable on a phone. notes: short lines under its name."""
    pw, ph, x0 = PANEL_WIDTH - 20, 90, 10
    label = wrap(t("class {name} (winner)", name=name) if winner else t("class {name}", name=name), font(15), pw)
    said = [line for note in notes for line in wrap(note, font(12), pw)]
    y = 6 + len(label) * line_height(font(15)) + 2
    y0 = y + len(said) * line_height(font(12)) + 4
    img, d = _canvas(PANEL_WIDTH, y0 + ph + 24)
    draw_lines(d, (x0, 6), label, font(15), WINNER if winner else INK)
    draw_lines(d, (x0, y), said, font(12), INK)
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


GRID_TEXT = 24  # px as drawn: a phone shows the 700 px perturbation grid at about half its size, this at 12 px


def labelled_grid(grid: np.ndarray, rows: list[str], columns: list[str], scale: int = 2, gap: int = 2, title: str = "") -> Image.Image:
    """(R, C, H, W) or (R, C, 3, H, W) images in [0, 1] tiled, each row named at the left and each
    column on top (the perturbation grid: dimensions x offsets). Every word is GRID_TEXT px, so it
    still reads where a phone shows the grid at half its size; a column's name wider than its
    column alternates between two lines, each name over its own column. The page names the grid
    in its text; the title is for the PNG a teacher downloads."""
    R, C = grid.shape[:2]
    H, W = grid.shape[-2:]
    f = font(GRID_TEXT)
    tile_w, tile_h = W * scale, H * scale
    left = 12 + max((round(f.getlength(n)) for n in rows), default=0)
    width = left + C * (tile_w + gap) + 6
    staggered = any(f.getlength(n) > tile_w + gap - 4 for n in columns)
    lines = 2 if staggered else 1
    titled = wrap(title, f, width - 12) if title else []
    top = 8 + len(titled) * line_height(f) + lines * line_height(f) + 4
    img, d = _canvas(width, top + R * (tile_h + gap) + 6)
    draw_lines(d, (6, 6), titled, f, INK)
    for c, name in enumerate(columns):
        x = left + c * (tile_w + gap) + tile_w / 2 - d.textlength(name, font=f) / 2
        line = c % 2 if staggered else 0
        d.text((min(max(x, 2), width - 2 - d.textlength(name, font=f)), top - 4 - (lines - line) * line_height(f)), name, fill=INK, font=f)
    for r, name in enumerate(rows):
        y = top + r * (tile_h + gap)
        d.text((6, y + (tile_h - line_height(f)) / 2), name, fill=INK, font=f)
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
    tw, th, gap, left = W * scale, H * scale, 8, 110
    block_w = T * (tw + gap) + 24
    width = left + blocks * block_w + 10
    titled = wrap(title, font(17), width - 20)
    scaled = wrap(coupling_scale_words(low, high, maps.shape[-1]), font(13), width - 20)
    named = [wrap(n, font(16), block_w - 24) for n in group_names]
    # room for the title and the blocks' names over the iteration numbers: more lines where they wrap
    top = 82 + (len(titled) - 1) * line_height(font(17)) + (max(map(len, named)) - 1) * line_height(font(16))
    img, d = _canvas(width, top + rows * (th + gap) + 12 + len(scaled) * line_height(font(13)))
    draw_lines(d, (10, 8), titled, font(17), INK)
    for k in range(blocks):
        _coupling_block(img, d, left + k * block_w, top, inputs[k], maps[k], named[k], low, high, scale)
    for r in range(rows):
        draw_lines(d, (10, top + r * (th + gap) + 10), wrap(row_names[r], font(14), left - 16), font(14), INK)
    draw_lines(d, (10, top + rows * (th + gap) + 8), scaled, font(13), INK)
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


COUPLING_TEXT = 14  # px: the smallest text of a coupling block, which a phone shows at its drawn size


def coupling_block(
    image: np.ndarray, maps: np.ndarray, name: str, row_names: list[str], low: float, high: float, scale: int = 3
) -> Image.Image:
    """One input's block of `coupling_overlays` on its own, each row named on a line above its
    tiles rather than at their left: maps (rows, T, G, G). No wider than its tiles, so a phone's
    column shows it at its drawn size, every word at COUPLING_TEXT px or more; a page shows the
    blocks side by side where they fit and one under the other on a phone. The scale goes in the
    page's caption."""
    rows, T = maps.shape[:2]
    H, W = image.shape
    tw, th, gap = W * scale, H * scale, 6
    width = T * (tw + gap) - gap + 8
    named = wrap(name, font(16), width - 8)
    f = font(COUPLING_TEXT + 1)
    labels = [wrap(joined_by().join(r.split("\n")), f, width - 8) for r in row_names]  # one line where it fits
    top = 54 + (len(named) - 1) * line_height(font(16))
    heights = [len(lines) * line_height(f) + 8 for lines in labels]  # a name, clear of the row above
    img, d = _canvas(width, top + sum(heights) + rows * (th + gap))
    _coupling_block(img, d, 4, top, image, maps, named, low, high, scale, gap, heights)
    y = top
    for r in range(rows):
        draw_lines(d, (4, y + 6), labels[r], f, INK)
        y += heights[r] + th + gap
    return img


def _coupling_block(
    img,
    d,
    x0: int,
    top: int,
    image,
    maps,
    name: list[str],
    low: float,
    high: float,
    scale: int,
    gap: int = 8,
    above: list[int] | None = None,
) -> None:
    """One input's maps (rows, T, G, G) over it, the block's name (its lines) and iteration numbers
    above; `above`: the pixels left free over each row (for its name), none by default."""
    rows, T = maps.shape[:2]
    H, W = image.shape
    tw, th = W * scale, H * scale
    span = max(high - low, 1e-12)
    draw_lines(d, (x0, top - 46 - (len(name) - 1) * line_height(font(16))), name, font(16), INK)
    g = np.clip(image, 0, 1) * 0.6
    for it in range(T):
        d.text((x0 + it * (tw + gap) + 4, top - 20), t("iteration {k}", k=it + 1), fill=GREY, font=font(COUPLING_TEXT))
    above = above or [0] * rows
    for r in range(rows):
        y = top + sum(above[: r + 1]) + r * (th + gap)
        for it in range(T):
            heat = np.asarray(Image.fromarray(maps[r, it].astype(np.float32)).resize((W, H), Image.BILINEAR))
            h = np.clip((heat - low) / span, 0, 1)
            rgb = np.stack([np.maximum(g, h), g * (1 - h), g * (1 - h)], -1)
            tile = Image.fromarray((rgb * 255).astype(np.uint8), "RGB").resize((tw, th), Image.NEAREST)
            img.paste(tile, (x0 + it * (tw + gap), y))
