"""Every checkpoint shipped in checkpoints/ loads, describes itself, and still measures what it claims."""

from pathlib import Path

import pytest
import torch

from capsviz.checkpoint import list_checkpoints, load_checkpoint
from capsviz.data import load_split
from capsviz.schema import CheckpointMeta
from capsviz.train import evaluate

SHIPPED_DIR = Path(__file__).resolve().parents[1] / "checkpoints"
SHIPPED = sorted(SHIPPED_DIR.glob("*.safetensors"))


def test_there_is_a_shipped_model():
    assert SHIPPED, "checkpoints/ must ship at least one model so a newcomer can explore at once"
    assert sum(p.stat().st_size for p in SHIPPED) < 120e6  # a clone stays quick: every model in float16, together under 120 MB


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_metadata(path):
    ((_, meta),) = [r for r in list_checkpoints(path.parent) if r[0] == path]
    assert isinstance(meta, CheckpointMeta), meta
    for key in ("config", "dataset", "epochs", "metrics", "training_time_s", "hardware", "capsviz_version", "run", "history"):
        assert key in meta.raw, key
    m = meta.metrics
    assert m.n_test == 10000 and 0 <= m.test_error <= 100 and m.how
    model, _ = load_checkpoint(path)
    assert sum(p.numel() for p in model.parameters()) == meta.parameters


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_error_agrees_on_real_data(path, real_data):
    model, meta = load_checkpoint(path)
    torch.manual_seed(0)
    data = load_split(meta.dataset, "test")
    ours = evaluate(model, meta.dataset, data)
    # the whole test set again: at most 5 of 10,000 images may flip (float16 storage, other CPUs)
    assert ours["n_test"] == 10000
    assert abs(ours["test_error"] - meta.metrics.test_error) <= 0.05, (ours, meta.metrics)


def test_attacks_are_not_masked_on_the_shipped_capsnet(real_data):
    """The margin loss is flat for confidently classified images (why attacks use cross-entropy)."""
    from capsviz.analysis.robustness import input_gradient, zero_gradient_fraction
    from capsviz.losses import margin_loss

    model, meta = load_checkpoint(SHIPPED_DIR / "capsnet-small-mnist.safetensors")
    data = load_split("mnist", "test")
    x, y = data.images[:64].float().div(255).unsqueeze(1), data.labels[:64]
    assert zero_gradient_fraction(model, x, y) < 0.15  # measured 7%: pixels no live Conv1 unit sees
    with torch.enable_grad():
        xg = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(margin_loss(model(xg, reconstruct=False).scores, y) * len(y), xg)
    assert (g == 0).float().mean() > 0.3  # most images sit in the margin loss's flat region
    assert input_gradient(model, x, y).abs().sum() > 0


MATRIX = [p for p in SHIPPED if p.stem.startswith("matrix")]


@pytest.mark.parametrize("path", MATRIX, ids=[p.stem for p in MATRIX])
def test_em_routing_sends_the_votes_to_the_winning_class(path, real_data):
    """What the EM page shows on a trained model: the first M-step shares every vote equally (R = 1/J);
    by the last iteration the predicted class has drawn a clearly larger share, on every image."""
    from capsviz.analysis.routing import em_trace

    model, meta = load_checkpoint(path)
    data = load_split(meta.dataset, "test")
    right, first, last = 0, [], []
    for i in range(32):
        tr = em_trace(model, data.images[i].float().div(255).numpy(), model.config.routing_iterations)
        pred = int(tr.a[-1].argmax())
        right += pred == int(data.labels[i])
        mass = tr.R.sum(1)  # (T, J): total assignment each class receives
        first.append(mass[0, pred] / mass[0].sum())
        last.append(mass[-1, pred] / mass[-1].sum())
    J = model.config.num_classes
    assert right >= 29, right
    assert all(abs(f - 1 / J) < 1e-5 for f in first)
    assert min(b - a for a, b in zip(first, last, strict=True)) > 0.1  # every image's coupling concentrates
    assert sum(last) / len(last) > 0.35  # far above uniform (0.1)


def test_photos_of_printed_digits_on_unevenly_lit_paper_are_read(tmp_path):
    """An upload as a phone would take it: dark digits on grey paper, light falling off to one side,
    JPEG. The shipped CapsNet reads all ten once the upload is prepared (it read 1 of 10, all as
    '8', when the picture was only inverted: the shaded paper counted as ink)."""
    import io

    import numpy as np
    from PIL import Image, ImageDraw, ImageFont

    from capsviz.data.transforms import picture_to_digit

    model, _ = load_checkpoint(SHIPPED_DIR / "capsnet-mnist.safetensors")
    font = ImageFont.load_default(size=200)
    read = []
    for d in range(10):
        paper = np.full((320, 240, 3), (200, 195, 185), np.float32) + np.linspace(-40, 30, 240)[None, :, None]
        img = Image.fromarray(paper.clip(0, 255).astype(np.uint8))
        ImageDraw.Draw(img).text((60, 40), str(d), fill=(40, 40, 50), font=font)
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=80)
        with torch.no_grad():
            read.append(int(model(torch.as_tensor(picture_to_digit(buf.getvalue()))[None, None]).scores.argmax()))
    assert read == list(range(10))
