"""Batch transforms that run on the training device, vectorised over the batch; and the
preparation of a user's own picture or drawing as an MNIST-style digit."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from capsviz.data.user import MAX_PICTURE_PIXELS


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W) or (B, C, H, W) -> float (B, C, H, W) in [0, 1]."""
    x = images.float() / 255.0
    return x.unsqueeze(1) if x.dim() == 3 else x


def random_shift(x: torch.Tensor, max_shift: int = 2, generator: torch.Generator | None = None) -> torch.Tensor:
    """Shift every image by its own random (dy, dx) in [-max_shift, max_shift], zero padding
    (the paper's only augmentation). x (B, C, H, W) -> same shape."""
    if max_shift == 0:
        return x
    B, C, H, W = x.shape
    s = max_shift
    padded = F.pad(x, (s, s, s, s))  # (B, C, H+2s, W+2s)
    off = torch.randint(0, 2 * s + 1, (2, B), generator=generator, device="cpu").to(x.device)
    rows = off[0].view(B, 1) + torch.arange(H, device=x.device)  # (B, H)
    cols = off[1].view(B, 1) + torch.arange(W, device=x.device)  # (B, W)
    b = torch.arange(B, device=x.device).view(B, 1, 1, 1)
    c = torch.arange(C, device=x.device).view(1, C, 1, 1)
    return padded[b, c, rows.view(B, 1, H, 1), cols.view(B, 1, 1, W)]


def place(digits: torch.Tensor, size: int, dy: torch.Tensor, dx: torch.Tensor) -> torch.Tensor:
    """Paste (B, h, w) digits into (B, size, size) zero canvases with top-left corners (dy, dx)."""
    B, h, w = digits.shape
    canvas = digits.new_zeros(B, size, size)
    rows = (dy.view(B, 1) + torch.arange(h, device=digits.device)).view(B, h, 1)
    cols = (dx.view(B, 1) + torch.arange(w, device=digits.device)).view(B, 1, w)
    canvas[torch.arange(B, device=digits.device).view(B, 1, 1), rows, cols] = digits
    return canvas


def mnist_style(image: np.ndarray) -> np.ndarray:
    """Prepare a user's drawing or photo (H, W) in [0, 1] the way MNIST digits were made: the ink's
    bounding box scaled to fit 20x20 (aspect kept), then centred by its centre of mass in 28x28."""
    from PIL import Image

    ink = image > 0.1
    if not ink.any():
        return np.zeros((28, 28), np.float32)
    rows, cols = np.nonzero(ink.any(1))[0], np.nonzero(ink.any(0))[0]
    crop = image[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
    h, w = crop.shape
    s = 20.0 / max(h, w)
    small = (
        np.asarray(
            Image.fromarray((crop * 255).astype(np.uint8)).resize((max(1, round(w * s)), max(1, round(h * s))), Image.LANCZOS), np.float32
        )
        / 255.0
    )
    out = np.zeros((28, 28), np.float32)
    h, w = small.shape
    total = small.sum()
    cy = (small.sum(1) * np.arange(h)).sum() / total if total else h / 2
    cx = (small.sum(0) * np.arange(w)).sum() / total if total else w / 2
    top = int(np.clip(round(14 - cy), 0, 28 - h))
    left = int(np.clip(round(14 - cx), 0, 28 - w))
    out[top : top + h, left : left + w] = small
    return np.clip(out, 0, 1)


def picture_to_digit(data: bytes) -> np.ndarray:
    """An uploaded picture's bytes -> (28, 28) float32 in [0, 1], a bright digit on black as in MNIST.

    Any picture PIL reads, turned upright by its EXIF orientation. Where the background is
    transparent, the opaque strokes are the ink (a digit drawn on a transparent layer); otherwise
    dark ink on light paper is inverted. The background level (the median) is subtracted, the ink
    stretched to full contrast and faint shading dropped, so a photo of unevenly lit grey paper
    works; then `mnist_style` sizes and centres it. Raises CapsvizError for a file that is not a
    readable picture, one too large, or one with no ink."""
    import io

    from PIL import Image, ImageOps, UnidentifiedImageError

    from capsviz.errors import CapsvizError
    from capsviz.i18n import t

    most = MAX_PICTURE_PIXELS // 1_000_000
    try:
        img = Image.open(io.BytesIO(data))
        if img.width * img.height > MAX_PICTURE_PIXELS:
            raise CapsvizError(
                t(
                    "That picture is {width}x{height} pixels; capsviz reads pictures up to {most} megapixels: "
                    "crop or shrink it to the digit.",
                    width=img.width,
                    height=img.height,
                    most=most,
                )
            )
        img.draft("L", (280, 280))  # JPEGs decode straight at a reduced size
        img = ImageOps.exif_transpose(img)
        img.thumbnail((280, 280))
        rgba = img.convert("RGBA")
        alpha = np.asarray(rgba.getchannel("A"), dtype=np.float32) / 255.0
        grey = np.asarray(rgba.convert("L"), dtype=np.float32) / 255.0
    except CapsvizError:
        raise
    except Image.DecompressionBombError:  # PIL's own limit, met before the size can be read
        raise CapsvizError(
            t("That picture is far too large; capsviz reads pictures up to {most} megapixels: crop or shrink it to the digit.", most=most)
        ) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        raise CapsvizError(
            t("That file is not a picture capsviz can read ({why}); try a PNG or JPEG of one digit.", why=type(e).__name__)
        ) from None
    if np.median(alpha) < 0.5:  # drawn on a transparent layer: the opaque strokes are the digit
        ink = alpha
    else:
        ink = 1.0 - grey if np.median(grey) > 0.5 else grey  # the background is the majority
    background = float(np.median(ink))
    span = float(ink.max()) - background
    if span < 0.1:
        raise CapsvizError(t("That picture looks blank: nothing stands out from its background. Upload a picture of one digit."))
    level = (ink - background) / span  # background ~0, the strongest ink 1
    return mnist_style(np.clip((level - 0.3) / 0.6, 0.0, 1.0))  # shading under 0.3 (uneven light on paper) is not ink


def picture_to_input(data: bytes, size: int, channels: int) -> np.ndarray:
    """An uploaded picture for a model trained on a user's own images: made exactly as that
    dataset's pictures were (capsviz.data.user.picture_array: upright, grey or RGB, centre-cropped
    to a square, resized to size x size) -> (S, S) or (3, S, S) float32 in [0, 1]. Raises
    CapsvizError for a file that is not a readable picture or one too large."""
    import io

    from PIL import Image, UnidentifiedImageError

    from capsviz.data.user import picture_array
    from capsviz.errors import CapsvizError
    from capsviz.i18n import t

    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.width * img.height > MAX_PICTURE_PIXELS:
                raise CapsvizError(
                    t(
                        "That picture is {width}x{height} pixels; capsviz reads pictures up to {most} megapixels: shrink it first.",
                        width=img.width,
                        height=img.height,
                        most=MAX_PICTURE_PIXELS // 1_000_000,
                    )
                )
            a = picture_array(img, size, channels == 3)  # (C, S, S)
    except CapsvizError:
        raise
    except Image.DecompressionBombError:
        raise CapsvizError(t("That picture is far too large; shrink it first.")) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        raise CapsvizError(t("That file is not a picture capsviz can read ({why}); try a PNG or JPEG.", why=type(e).__name__)) from None
    a = a.astype(np.float32) / 255.0
    return a[0] if channels == 1 else a


def fit_drawing(image: np.ndarray, size: int, channels: int) -> np.ndarray:
    """A (28, 28) drawing in [0, 1] for a model of size x size inputs with `channels` channels:
    resized, and white ink on black repeated in every channel -> (S, S) or (3, S, S)."""
    from PIL import Image

    a = np.asarray(image, np.float32)
    if a.shape != (size, size):
        a = np.asarray(Image.fromarray(a, "F").resize((size, size), Image.BILINEAR), np.float32)
    a = np.clip(a, 0, 1)
    return a if channels == 1 else np.repeat(a[None], channels, axis=0)
