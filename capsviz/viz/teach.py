"""Figures for the tour and the playgrounds, drawn with PIL: numpy in, PIL image out.

Drawn as images rather than plotly charts so that the figure on screen is the PNG a teacher
downloads and the frame of the GIF (plotly's static export would need kaleido, which capsviz
does not depend on).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from capsviz.i18n import N_, language, t
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


# ---------- words laid out to fit: Chinese and Japanese are written without spaces, and a CJK
# character is about as wide as the font is high, so a line that fits in English may not fit in
# them: every text a figure draws is wrapped to the room it has, and the figure grows to hold it.
_CJK = "\u2e80-\u2fff\u3000-\u30ff\u3400-\u9fff\uf900-\ufaff\uff00-\uffef"
_UNIT = re.compile(f"\\s+|[{_CJK}]|[^\\s{_CJK}]+")
# marks a line may not start with (they close what comes before) or end with (they open what follows)
_CLOSING = set("、。，．：；！？）」』】〕〉》・ー々ぁぃぅぇぉっゃゅょァィゥェォッャュョ,.:;!?)]}%")
_OPENING = set("（「『【〔〈《([{")


def line_height(f: ImageFont.FreeTypeFont) -> int:
    """Pixels from one line of `f` to the next."""
    ascent, descent = f.getmetrics()
    return ascent + descent + 2


def _units(text: str) -> list[str]:
    """`text` in the pieces a line may break between: words, runs of spaces and single CJK
    characters, a closing mark kept with what it closes and an opening mark with what it opens."""
    units: list[str] = []
    for u in _UNIT.findall(text):
        if units and not units[-1].isspace() and not u.isspace() and (u[0] in _CLOSING or units[-1][-1] in _OPENING):
            units[-1] += u
        else:
            units.append(u)
    return units


def wrap(text: str, f: ImageFont.FreeTypeFont, width: float) -> list[str]:
    """`text` as lines no wider than `width` pixels in font `f`, broken at spaces and between any two
    Chinese or Japanese characters (never before a closing mark); its own line breaks are kept. A
    word wider than `width` stands alone on its line."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for unit in _units(paragraph):
            if unit.isspace():
                line += unit if line else ""
                continue
            if not line or f.getlength(line + unit) <= width:
                line += unit
            else:
                lines.append(line.rstrip())
                line = unit
        lines.append(line.rstrip())
    return lines


def flow(items: list[str], f: ImageFont.FreeTypeFont, width: float, gap: str = "   ") -> list[str]:
    """Legend items in lines no wider than `width`: side by side, `gap` apart, while they fit; an
    item that does not fit on a line of its own is wrapped (`wrap`)."""
    lines: list[str] = []
    line = ""
    for item in items:
        if line and f.getlength(line + gap + item) <= width:
            line += gap + item
            continue
        if line:
            lines.append(line)
        *whole, line = wrap(item, f, width)
        lines += whole
    return lines + ([line] if line else [])


def draw_lines(draw: ImageDraw.ImageDraw, xy, lines: list[str], f: ImageFont.FreeTypeFont, fill) -> int:
    """`lines` one under the other from `xy`; returns the height they take."""
    x, y = xy
    for k, line in enumerate(lines):
        draw.text((x, y + k * line_height(f)), line, fill=fill, font=f)
    return len(lines) * line_height(f)


def _height(lines: list[str], f: ImageFont.FreeTypeFont) -> int:
    return len(lines) * line_height(f)


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


BAR = 300  # pixels of a full share bar
BAR_ROW = 24  # pixels from one bar to the next
SMALL = 13  # px: the smallest text of a routing figure's pictures (its pieces), numbers and names alike


BAR_NAMES = 100  # px at most for the bars' names (a longer name wraps): names and bars then fit a phone's width at full size


def _bar_label_width(names: list[str]) -> int:
    f = font(SMALL)
    return max(90, min(BAR_NAMES, 8 + max(int(f.getlength(n)) for n in names)))


def _share_bars(shares: np.ndarray, names: list[str]) -> Image.Image:
    """One stacked horizontal bar per row of `shares` (rows sum to at most 1), coloured per upper
    capsule, each part labelled with its value, each row named by `names` at its left (wrapped to
    BAR_NAMES px, the row as tall as its name)."""
    f = font(SMALL)
    label_w = _bar_label_width(names)
    named = [wrap(n, f, label_w - 8) for n in names]
    tops = np.cumsum([0] + [BAR_ROW + (len(n) - 1) * line_height(f) for n in named])
    img, draw = _canvas(label_w + BAR + 1, int(tops[-1]))
    for i, row in enumerate(shares):
        top = int(tops[i])
        draw_lines(draw, (0, top + 3), named[i], f, INK)
        draw.rectangle([label_w, top, label_w + BAR, top + 18], outline=(210, 210, 210))
        left = label_w
        for j, share in enumerate(row):
            w = share * BAR
            draw.rectangle([left, top, left + w, top + 18], fill=UPPER_COLOURS[j % 3])
            if w > 34:
                draw.text((left + 3, top + 2), f"{share:.2f}", fill="white", font=f)
            left += w
    return img


DYNAMIC_KEY = (
    N_("arrows: predictions u_hat (opacity = coupling c)"),
    N_("dashed: s = sum of c * u_hat"),
    N_("black: v = squash(s)"),
)
DYNAMIC_BARS = N_("each bar: one lower capsule's coupling c, split over the upper capsules (adds up to 1)")
EM_KEY = (
    N_("dots: votes V (opacity = assignment R)"),
    N_("cross: mean pose mu"),
    N_("ellipses: 1 and 2 spreads sigma"),
)
EM_VOTES_KEY = (N_("dots: votes V"),)
EM_BARS = N_("each bar: one lower capsule's assignment R, split over the upper capsules (adds up to 1)")


@dataclass(frozen=True)
class RoutingPieces:
    """A routing figure in the pieces a page lays out for the screen it is on (a phone's narrow one
    shows them one under the other, each at a readable size): the words that are text on the page,
    and the pictures, whose smallest text is SMALL px."""

    title: str
    key: list[str]  # what the arrows, dots and lines mean
    uppers: list[Image.Image]  # one per upper capsule: its name, its panel, its numbers; all of one height
    bars: Image.Image  # the lower capsules' share bars, each named at its left
    bar_x: int  # where in `bars` the bars start (the note under them starts there too)
    note: str  # what the bars show


def _pieces(title, key, uppers, stats, shares, names, note, panels) -> RoutingPieces:
    """What dynamic_pieces and em_pieces share: one picture per upper capsule (its name above its
    panel `panels[j]`, its numbers `stats[j]` under it; names and numbers wrapped to the panel's
    width, every picture as tall as the tallest), and the share bars of the lower capsules `names`."""
    heads = [wrap(u, font(15), PANEL) for u in uppers]
    under = [wrap(s, font(SMALL), PANEL) for s in stats] or [[] for _ in panels]
    head_h = max(_height(h, font(15)) for h in heads)
    under_h = max(line_height(font(SMALL)), *(_height(u, font(SMALL)) for u in under))  # a line even without numbers: frames align
    pictures = []
    for j, panel in enumerate(panels):
        img, d = _canvas(PANEL + 1, head_h + 4 + PANEL + 6 + under_h)
        draw_lines(d, (0, head_h - _height(heads[j], font(15))), heads[j], font(15), UPPER_COLOURS[j % 3])
        img.paste(panel, (0, head_h + 4))
        draw_lines(d, (0, head_h + 4 + PANEL + 6), under[j], font(SMALL), INK)
        pictures.append(img)
    return RoutingPieces(title, key, pictures, _share_bars(shares, names), _bar_label_width(names), note)


def whole(pieces: RoutingPieces) -> Image.Image:
    """The pieces as one picture, for slides and downloads: the title and the key on top, the upper
    capsules side by side, then the share bars with their note. Every text is wrapped to the room
    it has and the figure grows to hold it."""
    J = len(pieces.uppers)
    margin = 20
    width = max(J * (PANEL + margin) + margin, 640)
    inner = width - 2 * margin
    titled = wrap(pieces.title, font(18), inner)
    keyed = flow(pieces.key, font(12), inner)
    noted = wrap(pieces.note, font(12), max(inner - pieces.bar_x, BAR))
    top = 10 + _height(titled, font(18)) + 4 + _height(keyed, font(12)) + 8
    bars_y = top + pieces.uppers[0].height + 8
    img, d = _canvas(width, bars_y + pieces.bars.height + _height(noted, font(12)) + 8)
    y = 10 + draw_lines(d, (margin, 10), titled, font(18), INK) + 4
    draw_lines(d, (margin, y), keyed, font(12), GREY)
    for j, upper in enumerate(pieces.uppers):
        img.paste(upper, (margin + j * (PANEL + margin), top))
    img.paste(pieces.bars, (margin, bars_y))
    draw_lines(d, (margin + pieces.bar_x, bars_y + pieces.bars.height), noted, font(12), GREY)
    return img


def _panel(limit: float) -> tuple[Image.Image, ImageDraw.ImageDraw, Plane]:
    """A toy panel, its own image: arrows and ellipses stop at its edge."""
    panel, pd = _canvas(PANEL + 1, PANEL + 1)
    pl = Plane(pd, 0, 0, PANEL, limit)
    pl.frame()
    return panel, pd, pl


def _number_at(pd: ImageDraw.ImageDraw, x: float, y: float, k: int, fill) -> None:
    """Lower capsule k's number at pixel (x, y) of a panel, kept inside the panel."""
    f = font(SMALL)
    text = str(k)
    x = min(max(x, 2), PANEL - 2 - f.getlength(text))
    y = min(max(y, 2), PANEL - 2 - line_height(f))
    pd.text((x, y), text, fill=fill, font=f)


def dynamic_pieces(
    u_hat: np.ndarray,
    c: np.ndarray,
    s: np.ndarray,
    v: np.ndarray,
    title: str,
    names: list[str] | None = None,
    limit: float = 3.0,
    upper_names: list[str] | None = None,
    bar_note: str | None = None,
    lengths: np.ndarray | None = None,
) -> RoutingPieces:
    """One routing iteration drawn: a panel per upper capsule j with every prediction u_hat_j|i as
    an arrow (opacity = coupling c_ij), the weighted sum s_j dashed, the output v_j thick and black
    (inside the dotted unit circle, squash's bound), then the couplings as stacked bars.

    u_hat (I, J, 2), c (I, J), s and v (J, 2) for this iteration. `lengths` (J, 2): the |s_j| and
    |v_j| written under each panel when s and v are projections of longer vectors (their full
    lengths, not the drawn ones); by default the drawn lengths. Words in the reader's language:
    `names` (the lower capsules), `upper_names`, `bar_note` (by default the playground's)."""
    I, J, _ = u_hat.shape
    panels, stats = [], []
    for j in range(J):
        panel, pd, pl = _panel(limit)
        pl.circle(0, 0, 1.0, outline=(170, 170, 170))
        for i in range(I):
            x, y = u_hat[i, j]
            pl.arrow(0, 0, x, y, _rgba(UPPER_COLOURS[j % 3], 0.15 + 0.85 * c[i, j]), width=2)
            tx, ty = pl.p(x * 1.1, y * 1.1)
            _number_at(pd, tx - 4, ty - 7, i + 1, _rgba(INK, 0.3 + 0.7 * c[i, j]))
        pl.arrow(0, 0, *s[j], (90, 90, 90, 255), width=2, dashed=True)
        pl.arrow(0, 0, *v[j], (0, 0, 0, 255), width=5)
        panels.append(panel)
        s_len, v_len = lengths[j] if lengths is not None else (np.linalg.norm(s[j]), np.linalg.norm(v[j]))
        lens = dict(s=f"{s_len:.2f}", v=f"{v_len:.2f}")
        if np.abs(s[j]).max() > limit:
            stats.append(t("|s| = {s}   |v| = {v} (s runs off the plot)", **lens))
        else:
            stats.append(t("|s| = {s}   |v| = {v}", **lens))
    return _pieces(
        title,
        [t(k) for k in DYNAMIC_KEY],
        upper_names or [t("upper capsule {j}", j=j + 1) for j in range(J)],
        stats,
        c,
        names or [t("lower {i}", i=i + 1) for i in range(I)],
        t(DYNAMIC_BARS) if bar_note is None else bar_note,
        panels,
    )


def em_frame(*args, **kwargs) -> Image.Image:
    """`em_pieces` as one picture (slides, downloads, the tour)."""
    return whole(em_pieces(*args, **kwargs))


def em_pieces(
    votes: np.ndarray,
    R: np.ndarray,
    mu: np.ndarray,
    sigma: np.ndarray,
    a: np.ndarray,
    title: str,
    names: list[str] | None = None,
    limit: float = 3.0,
    upper_names: list[str] | None = None,
    bar_note: str | None = None,
    fit: bool = True,
) -> RoutingPieces:
    """One EM iteration drawn: a panel per upper capsule j with the votes V_ij as numbered dots
    (opacity = assignment R_ij), j's Gaussian as its mean (cross) and 1- and 2-spread ellipses,
    its activation a_j under it, then the assignments as stacked bars. Without `fit`, the votes
    alone (what routing starts from).

    votes (I, J, 2); R (I, J) the assignments this M-step used; mu, sigma (J, 2); a (J,)."""
    I, J, _ = votes.shape
    panels, stats = [], []
    for j in range(J):
        panel, pd, pl = _panel(limit)
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
            _number_at(pd, tx + 7, ty - 17 + 4 * (i % 3), i + 1, _rgba(INK, 0.25 + 0.75 * R[i, j]))
        panels.append(panel)
        if fit:
            stats.append(
                t(
                    "activation a = {a}   spread sigma = ({x}, {y})",
                    a=f"{a[j]:.2f}",
                    x=f"{sigma[j, 0]:.2f}",
                    y=f"{sigma[j, 1]:.2f}",
                )
            )
    return _pieces(
        title,
        [t(k) for k in (EM_KEY if fit else EM_VOTES_KEY)],
        upper_names or [t("upper capsule {j}", j=j + 1) for j in range(J)],
        stats,
        R,
        names or [t("lower {i}", i=i + 1) for i in range(I)],
        t(EM_BARS) if bar_note is None else bar_note,
        panels,
    )


def feature_maps(maps: np.ndarray, captions: list[str], scale: int = 4, columns: int = 8, normalise: bool = True) -> Image.Image:
    """(K, H, W) maps in a grid with a caption under each (wrapped to its map's width): each scaled
    to its own maximum, or as they are when `normalise` is off (values already in [0, 1], such as
    activations)."""
    K, H, W = maps.shape
    rows = -(-K // columns)
    f = font(12)
    cw = W * scale + 10
    said = [wrap(c, f, cw - 6) for c in captions]
    ch = H * scale + 8 + max(_height(s, f) for s in said)
    img, d = _canvas(columns * cw + 10, rows * ch + 10)
    for k in range(K):
        m = maps[k] / max(float(maps[k].max()), 1e-8) if normalise else maps[k]
        tile = Image.fromarray((np.clip(m, 0, 1) * 255).astype(np.uint8), "L").resize((W * scale, H * scale), Image.NEAREST)
        x, y = 10 + (k % columns) * cw, 10 + (k // columns) * ch
        img.paste(tile.convert("RGB"), (x, y))
        draw_lines(d, (x, y + H * scale + 3), said[k], f, INK)
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
    horizontal reference lines (e.g. the margin loss's 0.9 and 0.1) labelled at the right. A long
    class name ("Ankle boot") is wrapped under its bar and the bars spread to make room for it."""
    J = len(values)
    f = font(14)
    widest = max(f.getlength(u) for n in names for u in _units(str(n)))
    slot = max(60, int(widest) + 12)  # pixels per bar: the bar and its name under it
    W, plot_h, left = slot * J + 120, 236, 60
    named = [wrap(str(n), f, slot - 6) for n in names]
    titled = wrap(title, font(16), W - 20)
    labelled = wrap(ylabel, font(12), W - 20)
    top = 10 + _height(titled, font(16)) + _height(labelled, font(12)) + 14
    img, d = _canvas(W, top + plot_h + 14 + max(_height(n, f) for n in named))
    y = 10 + draw_lines(d, (10, 10), titled, font(16), INK)
    draw_lines(d, (10, y), labelled, font(12), GREY)
    y_of = lambda v: top + plot_h * (1 - v)
    d.line([left, y_of(0), W - 50, y_of(0)], fill=GREY)
    for tick in (0, 0.5, 1):
        d.text((left - 30, y_of(tick) - 7), f"{tick:g}", fill=GREY, font=font(12))
    for name, v in (lines or {}).items():
        for x in range(left, W - 50, 8):
            d.line([x, y_of(v), x + 4, y_of(v)], fill=(150, 150, 150))
        d.text((W - 48, y_of(v) - 7), name, fill=GREY, font=font(11))
    for j, v in enumerate(values):
        middle = left + 10 + j * slot + 20
        colour = (214, 39, 40) if j == highlight else (127, 127, 127)
        d.rectangle([middle - 20, y_of(float(np.clip(v, 0, 1))), middle + 20, y_of(0)], fill=colour)
        d.text((middle - 18, y_of(float(np.clip(v, 0, 1))) - 16), f"{v:.2f}", fill=INK, font=font(12))
        for k, line in enumerate(named[j]):
            d.text((middle - f.getlength(line) / 2, y_of(0) + 6 + k * line_height(f)), line, fill=INK, font=f)
    return img


def side_by_side(images: list[np.ndarray], captions: list[str], scale: int = 8) -> Image.Image:
    """(H, W) or (C, H, W) images in [0, 1] in a row with a caption under each (wrapped to its
    image's width): the input beside its reconstruction."""
    H, W = images[0].shape[-2:]
    f = font(14)
    said = [wrap(c, f, W * scale + 10) for c in captions]
    img, d = _canvas(len(images) * (W * scale + 20) + 20, H * scale + 26 + max(_height(s, f) for s in said))
    for k, (a, lines) in enumerate(zip(images, said, strict=True)):
        tile = to_image(a, scale)
        x = 20 + k * (W * scale + 20)
        img.paste(tile.convert("RGB"), (x, 10))
        draw_lines(d, (x, H * scale + 18), lines, f, INK)
    return img


def value_grid(
    values: np.ndarray, rows: list[str], columns: list[str], title: str, highlight: int | None = None, highlight_row: int | None = None
) -> Image.Image:
    """A table of values in [0, vmax] shaded by size, each cell with its number: (len(rows), len(columns));
    the `highlight` column or the `highlight_row` outlined in red; the title wrapped to the table's width."""
    R, C = values.shape
    f = font(13)
    left = 12 + max(int(f.getlength(r)) for r in rows)
    cw, ch = 52, 26
    width = left + C * cw + 20
    titled = wrap(title, font(15), width - 20)
    top = 8 + _height(titled, font(15)) + 26
    img, d = _canvas(width, top + R * ch + 16)
    draw_lines(d, (10, 8), titled, font(15), INK)
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


CELL_PADDING = 17  # px: a dataframe cell's padding, both sides (Streamlit's grid: 8.5 px each)
WIDE = re.compile(r"([\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]+)")  # Chinese, Japanese and full-width runs


def column_width(texts, least: int, size: int = 13, latin: Path | None = None) -> int:
    """Pixels a dataframe's column needs to show every text of `texts` whole in the grid's `size`
    px font, and never under `least`. Chinese and Japanese are measured in Noto Sans CJK (a
    browser's fallback for them, one em a character in any CJK font), the rest in `latin`, the
    grid's own font file where the page has it, else in Noto Sans CJK, whose Latin is wider."""
    cjk = export_font("ja") or export_font("zh-Hans")
    wide = ImageFont.truetype(str(cjk), size) if cjk else ImageFont.load_default(size=size)
    narrow = wide
    if latin:
        narrow = ImageFont.truetype(str(latin), size)
        with contextlib.suppress(OSError):  # OSError: not a variable font, already regular
            narrow.set_variation_by_axes([400])  # a variable font's regular weight, as the grid draws it

    def length(text: str) -> float:
        return sum((wide if k % 2 else narrow).getlength(run) for k, run in enumerate(WIDE.split(text)))

    return max([least] + [round(length(str(x))) + CELL_PADDING + 2 for x in texts])
