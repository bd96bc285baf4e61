"""Figures for the tour and the playgrounds, drawn with PIL: numpy in, PIL image out.

Drawn as images rather than plotly charts so that the figure on screen is the PNG a teacher
downloads and the frame of the GIF (plotly's static export would need kaleido, which capsviz
does not depend on).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from capsviz.i18n import language, t
from capsviz.viz import grey, to_image

UPPER_COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44)]  # one per upper capsule, as in the bars
GREY = (120, 120, 120)
INK = (30, 30, 30)
PANEL = 300  # pixels per toy panel


def font(size: int = 14) -> ImageFont.FreeTypeFont:
    """The font figures draw their words in, for the language of the run: Pillow's own for English,
    the shipped Noto Sans CJK cut (capsviz/fonts) for Chinese and Japanese, so that exports (PNG, GIF)
    show real glyphs rather than empty boxes."""
    return _font(language(), size)


FONT_DIR = Path(__file__).resolve().parent.parent / "fonts"


def export_font(lang: str) -> Path | None:
    """The font file `lang`'s words are drawn with, None for English (Pillow's own) or when missing."""
    path = FONT_DIR / f"{lang}.otf"
    return path if lang != "en" and path.exists() else None


def font_note(lang: str) -> str | None:
    """One line for a page where the figures of `lang` cannot draw its characters, else None."""
    if lang == "en" or export_font(lang):
        return None
    return t("No font for this language was found (capsviz/fonts is missing): figures show its words as empty boxes.")


@lru_cache(maxsize=64)
def _font(lang: str, size: int) -> ImageFont.FreeTypeFont:
    path = export_font(lang)
    return ImageFont.truetype(str(path), size) if path else ImageFont.load_default(size=size)


class Plane:
    """Maps 2-D data coordinates in [-limit, limit]^2 onto a square box of the image, y up."""

    def __init__(self, draw: ImageDraw.ImageDraw, x0: int, y0: int, size: int, limit: float):
        self.draw, self.x0, self.y0, self.size, self.limit = draw, x0, y0, size, limit

    def p(self, x: float, y: float) -> tuple[float, float]:
        k = self.size / (2 * self.limit)
        return self.x0 + (x + self.limit) * k, self.y0 + (self.limit - y) * k

    def scale(self, d: float) -> float:
        return d * self.size / (2 * self.limit)

    def frame(self) -> None:
        d = self.draw
        d.rectangle([self.x0, self.y0, self.x0 + self.size, self.y0 + self.size], outline=(200, 200, 200), fill=(255, 255, 255))
        d.line([self.p(-self.limit, 0), self.p(self.limit, 0)], fill=(225, 225, 225))
        d.line([self.p(0, -self.limit), self.p(0, self.limit)], fill=(225, 225, 225))

    def circle(self, x: float, y: float, rx: float, ry: float | None = None, **kw) -> None:
        cx, cy = self.p(x, y)
        rx, ry = self.scale(rx), self.scale(rx if ry is None else ry)
        self.draw.ellipse([cx - rx, cy - ry, cx + rx, cy + ry], **kw)

    def arrow(self, x0, y0, x1, y1, colour, width: int = 2, dashed: bool = False) -> None:
        arrow(self.draw, self.p(x0, y0), self.p(x1, y1), colour, width, dashed)


def arrow(draw: ImageDraw.ImageDraw, start, end, colour, width: int = 2, dashed: bool = False) -> None:
    """An arrow between two pixel positions, its head scaled to the line's width."""
    a, b = np.array(start, float), np.array(end, float)
    length = np.linalg.norm(b - a)
    if length < 1:
        return
    u = (b - a) / length
    head = min(10.0 + width, length * 0.6)
    stem = b - u * head * 0.8
    if dashed:
        n = max(int(length / 8), 1)
        for k in range(0, n, 2):
            p, q = a + (stem - a) * k / n, a + (stem - a) * min(k + 1, n) / n
            draw.line([tuple(p), tuple(q)], fill=colour, width=width)
    else:
        draw.line([tuple(a), tuple(stem)], fill=colour, width=width)
    side = np.array([-u[1], u[0]]) * head * 0.45
    draw.polygon([tuple(b), tuple(b - u * head + side), tuple(b - u * head - side)], fill=colour)


def _rgba(colour, alpha: float) -> tuple[int, int, int, int]:
    return (*colour, int(round(255 * float(np.clip(alpha, 0, 1)))))


def _canvas(width: int, height: int) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    img = Image.new("RGB", (width, height), "white")
    return img, ImageDraw.Draw(img, "RGBA")


def _share_bars(draw, x: int, y: int, shares: np.ndarray, names: list[str], note: str, width: int = 300) -> int:
    """One stacked horizontal bar per row of `shares` (rows sum to at most 1), coloured per upper
    capsule, each part labelled with its value. Returns the y below the last bar."""
    f = font(13)
    label_w = max(90, 8 + max(int(draw.textlength(n, font=f)) for n in names))
    for i, row in enumerate(shares):
        top = y + i * 24
        draw.text((x, top + 3), names[i], fill=INK, font=f)
        draw.rectangle([x + label_w, top, x + label_w + width, top + 18], outline=(210, 210, 210))
        left = x + label_w
        for j, share in enumerate(row):
            w = share * width
            draw.rectangle([left, top, left + w, top + 18], fill=UPPER_COLOURS[j % 3])
            if w > 34:
                draw.text((left + 3, top + 2), f"{share:.2f}", fill="white", font=f)
            left += w
    draw.text((x + label_w, y + len(shares) * 24), note, fill=GREY, font=font(12))
    return y + len(shares) * 24 + 20


def dynamic_frame(
    u_hat: np.ndarray,
    c: np.ndarray,
    s: np.ndarray,
    v: np.ndarray,
    title: str,
    names: list[str] | None = None,
    limit: float = 3.0,
    upper_names: list[str] | None = None,
    bar_note: str = "each bar: one lower capsule's coupling c, split over the upper capsules (adds up to 1)",
    lengths: np.ndarray | None = None,
) -> Image.Image:
    """One routing iteration drawn: a panel per upper capsule j with every prediction u_hat_j|i as
    an arrow (opacity = coupling c_ij), the weighted sum s_j dashed, the output v_j thick and black
    (inside the dotted unit circle, squash's bound), then the couplings as stacked bars.

    u_hat (I, J, 2), c (I, J), s and v (J, 2) for this iteration. `lengths` (J, 2): the |s_j| and
    |v_j| written under each panel when s and v are projections of longer vectors (their full
    lengths, not the drawn ones); by default the drawn lengths."""
    I, J, _ = u_hat.shape
    names = names or [f"lower {i + 1}" for i in range(I)]
    margin = 20
    width = max(J * (PANEL + margin) + margin, 640)
    top = 84
    img, d = _canvas(width, top + PANEL + 34 + I * 24 + 24)
    d.text((margin, 10), title, fill=INK, font=font(18))
    d.text(
        (margin, 36),
        "arrows: predictions u_hat (opacity = coupling c)   dashed: s = sum of c * u_hat   black: v = squash(s)",
        fill=GREY,
        font=font(12),
    )
    for j in range(J):
        x0 = margin + j * (PANEL + margin)
        panel, pd = _canvas(PANEL + 1, PANEL + 1)  # its own image: arrows and ellipses stop at its edge
        pl = Plane(pd, 0, 0, PANEL, limit)
        pl.frame()
        pl.circle(0, 0, 1.0, outline=(170, 170, 170))
        for i in range(I):
            x, y = u_hat[i, j]
            pl.arrow(0, 0, x, y, _rgba(UPPER_COLOURS[j % 3], 0.15 + 0.85 * c[i, j]), width=2)
            tx, ty = pl.p(x * 1.1, y * 1.1)
            pd.text((tx - 4, ty - 7), str(i + 1), fill=_rgba(INK, 0.3 + 0.7 * c[i, j]), font=font(13))
        pl.arrow(0, 0, *s[j], (90, 90, 90, 255), width=2, dashed=True)
        pl.arrow(0, 0, *v[j], (0, 0, 0, 255), width=5)
        img.paste(panel, (x0, top))
        d.text((x0, top - 22), upper_names[j] if upper_names else f"upper capsule {j + 1}", fill=UPPER_COLOURS[j % 3], font=font(15))
        beyond = " (s runs off the plot)" if np.abs(s[j]).max() > limit else ""
        s_len, v_len = lengths[j] if lengths is not None else (np.linalg.norm(s[j]), np.linalg.norm(v[j]))
        d.text((x0, top + PANEL + 6), f"|s| = {s_len:.2f}   |v| = {v_len:.2f}{beyond}", fill=INK, font=font(13))
    _share_bars(d, margin, top + PANEL + 34, c, names, bar_note)
    return img


def em_frame(
    votes: np.ndarray,
    R: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    a: np.ndarray,
    title: str,
    names: list[str] | None = None,
    limit: float = 3.0,
    upper_names: list[str] | None = None,
    bar_note: str = "each bar: one lower capsule's assignment R, split over the upper capsules (adds up to 1)",
    fit: bool = True,
) -> Image.Image:
    """One EM iteration drawn: a panel per upper capsule j with the votes V_ij as numbered dots
    (opacity = assignment R_ij), j's Gaussian as its mean (cross) and 1- and 2-spread ellipses,
    its activation a_j in the title, then the assignments as stacked bars. Without `fit`, the votes
    alone (what routing starts from).

    votes (I, J, 2); R (I, J) the assignments this M-step used; mu, sigma (J, 2); a (J,)."""
    I, J, _ = votes.shape
    names = names or [f"lower {i + 1}" for i in range(I)]
    margin = 20
    width = max(J * (PANEL + margin) + margin, 640)
    top = 84
    img, d = _canvas(width, top + PANEL + 34 + I * 24 + 24)
    d.text((margin, 10), title, fill=INK, font=font(18))
    legend = "dots: votes V (opacity = assignment R)   cross: mean pose mu   ellipses: 1 and 2 spreads sigma" if fit else "dots: votes V"
    d.text((margin, 36), legend, fill=GREY, font=font(12))
    for j in range(J):
        x0 = margin + j * (PANEL + margin)
        panel, pd = _canvas(PANEL + 1, PANEL + 1)
        pl = Plane(pd, 0, 0, PANEL, limit)
        pl.frame()
        colour = UPPER_COLOURS[j % 3]
        alpha = 0.12 + 0.5 * a[j]  # a more active capsule draws a stronger Gaussian
        if fit:
            pl.circle(*mu[j], 2 * sigma[j, 0], 2 * sigma[j, 1], fill=_rgba(colour, alpha * 0.35), outline=_rgba(colour, 0.6))
            pl.circle(*mu[j], sigma[j, 0], sigma[j, 1], fill=_rgba(colour, alpha * 0.6), outline=_rgba(colour, 0.9))
        for i in range(I):
            x, y = votes[i, j]
            pl.circle(x, y, 0.09 * limit / 3, fill=_rgba(INK, 0.12 + 0.88 * R[i, j]) if fit else _rgba(colour, 1.0))
        if fit:
            cx, cy = pl.p(*mu[j])
            pd.line([cx - 7, cy - 7, cx + 7, cy + 7], fill=(0, 0, 0), width=3)
            pd.line([cx - 7, cy + 7, cx + 7, cy - 7], fill=(0, 0, 0), width=3)
        for i in range(I):  # labels last, over the ellipses and the cross
            tx, ty = pl.p(*votes[i, j])
            pd.text((tx + 7, ty - 17 + 4 * (i % 3)), str(i + 1), fill=_rgba(INK, 0.25 + 0.75 * R[i, j]), font=font(13))
        img.paste(panel, (x0, top))
        d.text((x0, top - 22), upper_names[j] if upper_names else f"upper capsule {j + 1}", fill=colour, font=font(15))
        if fit:
            stats = f"activation a = {a[j]:.2f}   spread sigma = ({sigma[j, 0]:.2f}, {sigma[j, 1]:.2f})"
            d.text((x0, top + PANEL + 6), stats, fill=INK, font=font(13))
    _share_bars(d, margin, top + PANEL + 34, R, names, bar_note)
    return img


def feature_maps(maps: np.ndarray, captions: list[str], scale: int = 4, columns: int = 8, normalise: bool = True) -> Image.Image:
    """(K, H, W) maps in a grid with a caption under each: each scaled to its own maximum, or as
    they are when `normalise` is off (values already in [0, 1], such as activations)."""
    K, H, W = maps.shape
    rows = -(-K // columns)
    cw, ch = W * scale + 10, H * scale + 22
    img, d = _canvas(columns * cw + 10, rows * ch + 10)
    for k in range(K):
        m = maps[k] / max(float(maps[k].max()), 1e-8) if normalise else maps[k]
        tile = Image.fromarray((np.clip(m, 0, 1) * 255).astype(np.uint8), "L").resize((W * scale, H * scale), Image.NEAREST)
        x, y = 10 + (k % columns) * cw, 10 + (k // columns) * ch
        img.paste(tile.convert("RGB"), (x, y))
        d.text((x, y + H * scale + 3), captions[k], fill=INK, font=font(12))
    return img


def capsule_arrows(image: np.ndarray, lengths: np.ndarray, directions: np.ndarray, cell: int = 56) -> Image.Image:
    """Primary capsules on their G x G grid over the faint input: in each cell the longest capsule
    as an arrow whose length is its length (presence; a full half-cell = 1) and whose direction is
    its pose projected on two directions. lengths (G, G), directions (G, G, 2) unit vectors."""
    G = lengths.shape[0]
    size = G * cell
    base = Image.fromarray((np.clip(grey(image), 0, 1) * 90 + 165).astype(np.uint8), "L").resize((size, size), Image.BILINEAR)
    img = Image.new("RGB", (size + 20, size + 20), "white")
    img.paste(Image.eval(base, lambda p: 420 - p if p > 165 else 255).convert("RGB"), (10, 10))  # ink grey on white
    d = ImageDraw.Draw(img, "RGBA")
    for r in range(G):
        for q in range(G):
            cx, cy = 10 + (q + 0.5) * cell, 10 + (r + 0.5) * cell
            d.rectangle([10 + q * cell, 10 + r * cell, 10 + (q + 1) * cell, 10 + (r + 1) * cell], outline=(220, 220, 220))
            L = float(lengths[r, q]) * cell * 0.48
            dx, dy = directions[r, q] * L
            if L < 2:
                d.ellipse([cx - 2, cy - 2, cx + 2, cy + 2], fill=(214, 39, 40, 255))
                continue
            arrow(d, (cx - dx / 2, cy + dy / 2), (cx + dx / 2, cy - dy / 2), (214, 39, 40, 255), width=3)
    return img


def bars(
    values: np.ndarray, names: list[str], highlight: int, title: str, ylabel: str, lines: dict[str, float] | None = None
) -> Image.Image:
    """One bar per class in [0, 1], the highlighted one red, values written on top; optional
    horizontal reference lines (e.g. the margin loss's 0.9 and 0.1) labelled at the right."""
    J = len(values)
    W, H, left, bottom, top = 60 * J + 120, 340, 60, 40, 64
    img, d = _canvas(W, H)
    d.text((10, 10), title, fill=INK, font=font(16))
    plot_h = H - top - bottom
    y_of = lambda v: top + plot_h * (1 - v)
    d.line([left, y_of(0), W - 50, y_of(0)], fill=GREY)
    for tick in (0, 0.5, 1):
        d.text((left - 30, y_of(tick) - 7), f"{tick:g}", fill=GREY, font=font(12))
    d.text((10, 34), ylabel, fill=GREY, font=font(12))
    for name, v in (lines or {}).items():
        for x in range(left, W - 50, 8):
            d.line([x, y_of(v), x + 4, y_of(v)], fill=(150, 150, 150))
        d.text((W - 48, y_of(v) - 7), name, fill=GREY, font=font(11))
    for j, v in enumerate(values):
        x = left + 10 + j * 60
        colour = (214, 39, 40) if j == highlight else (127, 127, 127)
        d.rectangle([x, y_of(float(np.clip(v, 0, 1))), x + 40, y_of(0)], fill=colour)
        d.text((x + 2, y_of(float(np.clip(v, 0, 1))) - 16), f"{v:.2f}", fill=INK, font=font(12))
        d.text((x + 15, y_of(0) + 6), str(names[j]), fill=INK, font=font(14))
    return img


def side_by_side(images: list[np.ndarray], captions: list[str], scale: int = 8) -> Image.Image:
    """(H, W) or (C, H, W) images in [0, 1] in a row with a caption under each (input beside reconstruction)."""
    H, W = images[0].shape[-2:]
    img, d = _canvas(len(images) * (W * scale + 20) + 20, H * scale + 50)
    for k, (a, cap) in enumerate(zip(images, captions, strict=True)):
        tile = to_image(a, scale)
        x = 20 + k * (W * scale + 20)
        img.paste(tile.convert("RGB"), (x, 10))
        d.text((x, H * scale + 18), cap, fill=INK, font=font(14))
    return img


def value_grid(
    values: np.ndarray, rows: list[str], columns: list[str], title: str, highlight: int | None = None, highlight_row: int | None = None
) -> Image.Image:
    """A table of values in [0, vmax] shaded by size, each cell with its number: (len(rows), len(columns));
    the `highlight` column or the `highlight_row` outlined in red."""
    R, C = values.shape
    f = font(13)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    left = 12 + max(int(probe.textlength(r, font=f)) for r in rows)
    cw, ch, top = 52, 26, 58
    img, d = _canvas(left + C * cw + 20, top + R * ch + 16)
    d.text((10, 8), title, fill=INK, font=font(15))
    vmax = max(float(values.max()), 1e-8)
    for k, name in enumerate(columns):
        d.text((left + k * cw + 18, top - 20), name, fill=(214, 39, 40) if k == highlight else INK, font=f)
    for r in range(R):
        d.text((6, top + r * ch + 5), rows[r], fill=(214, 39, 40) if r == highlight_row else INK, font=f)
        for k in range(C):
            shade = int(255 - 180 * values[r, k] / vmax)
            box = [left + k * cw, top + r * ch, left + (k + 1) * cw - 2, top + (r + 1) * ch - 2]
            d.rectangle(box, fill=(shade, shade, 255), outline=(214, 39, 40) if k == highlight or r == highlight_row else None)
            d.text((box[0] + 8, box[1] + 5), f"{values[r, k]:.2f}", fill="white" if shade < 150 else INK, font=f)
    return img


def markdown_table(columns: dict[str, list | np.ndarray]) -> str:
    """A small table as Markdown: the page draws it as plain text, with no table widget to load.
    Numbers get three decimals; every column must be as long as the first."""
    names = list(columns)
    rows = len(columns[names[0]])

    def cell(v) -> str:
        return f"{v:.3f}" if isinstance(v, float | np.floating) else str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(cell(columns[c][r]) for c in names) + " |" for r in range(rows)]
    return "\n".join(lines)
