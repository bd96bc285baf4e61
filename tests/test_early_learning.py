"""A fresh CapsNet must start where squash passes a gradient (capsviz.analysis.early_learning).

With DigitCaps' W at a fixed 0.01 the first routed s was ~0.01 long and |v| ~ |s|^2 ~ 1e-4:
the paper CapsNet then spent ~20 steps near chance on MNIST (RESULTS.md)."""

import pytest
import torch
from synthetic import synthetic_digits

from capsviz.analysis import early_learning as el
from capsviz.config import preset
from capsviz.data.transforms import to_float
from capsviz.models import build_model


@pytest.mark.parametrize("name", ["capsnet-small", "capsnet", "capsnet-affine"])
def test_fresh_digit_capsules_start_off_squash_flat_region(name):
    images, _ = synthetic_digits(16, 0)
    torch.manual_seed(0)
    model = build_model(preset(name))
    S = model.config.in_size
    x = torch.nn.functional.pad(to_float(torch.from_numpy(images)), [(S - 28) // 2] * 4)
    with torch.no_grad():
        lengths = model(x, reconstruct=False).scores  # (B, J)
    # W at 0.01: mean |v| 1e-5 (small) to 8e-5 (paper); sqrt(3 / I): ~1e-3 to 2e-3 whatever I is,
    # far below 0.09, where (capsnet-small, W at 0.5) learning stalled again
    assert 3e-4 < lengths.mean().item() < 0.03


def test_experiment_forward_is_the_models_and_every_variant_trains(synthetic_data):
    batches = el.fixed_batches(2, batch_size=16)
    mine = el.run_variant(el.VARIANTS["capsviz"], batches, model_name="capsnet-small")
    here = el.run_variant(el.VARIANTS["capsviz-here"], batches, model_name="capsnet-small")
    assert here["loss"] == pytest.approx(mine["loss"], rel=1e-4)
    for name in ("layout=flat+detach", "w_std=0.01", "margin_mean"):
        res = el.run_variant(el.variant(name), batches, model_name="capsnet-small")
        assert len(res["accuracy"]) == 2 and all(torch.isfinite(torch.tensor(res["loss"])))
    assert el.report_row("capsviz", mine).startswith("capsviz")
