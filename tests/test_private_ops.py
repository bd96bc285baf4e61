"""PyTorch's private GEMM ops (capsviz.kernels.gemm.PRIVATE_OPS) are a fast path only: with any one of
them missing, as in another torch version, the model still runs, on the public GEMM, with the
same results."""

import pytest
import torch

from capsviz.config import preset
from capsviz.kernels import gemm, policy
from capsviz.models import build_model


@pytest.fixture
def fresh_checks():
    gemm.mkl_packed_gemm.cache_clear()
    gemm.onednn_bf16_gemm.cache_clear()
    yield
    gemm.mkl_packed_gemm.cache_clear()
    gemm.onednn_bf16_gemm.cache_clear()


def capsules(x: torch.Tensor, bf16: bool) -> tuple[torch.Tensor, object]:
    """Capsules of each image alone (batch 1: the packed-weight path) from one fixed small model."""
    torch.manual_seed(0)
    m = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)).eval()
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = torch.cat([m(x[i : i + 1]).capsules.float() for i in range(len(x))])
    return out, m.primary.kernel_cache.packed


@pytest.mark.parametrize("name", list(gemm.PRIVATE_OPS))
@pytest.mark.parametrize("bf16", [False, True])
def test_each_private_op_missing_falls_back_to_the_public_gemm_with_equal_results(name, bf16, fresh_checks, monkeypatch):
    x = torch.rand(3, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    fast, packed = capsules(x, bf16)
    kind = "onednn" if bf16 else "mkl"
    uses_it = name.startswith(kind)
    if uses_it and (gemm.onednn_bf16_gemm() if bf16 else gemm.mkl_packed_gemm()):
        assert packed is not None and packed[2] == kind  # the fast path ran, so the comparison means something

    monkeypatch.setitem(gemm.PRIVATE_OPS, name, (gemm.PRIVATE_OPS[name][0], "_no_such_op_in_this_torch"))
    gemm.mkl_packed_gemm.cache_clear()
    gemm.onednn_bf16_gemm.cache_clear()
    assert gemm.private_op(name) is None
    slow, packed = capsules(x, bf16)
    if uses_it:
        assert packed is None  # the public im2col GEMM ran
    tol = dict(rtol=0.02, atol=2e-3) if bf16 else dict(rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(slow, fast, **tol)


def test_a_private_op_that_fails_or_answers_wrong_is_not_used(fresh_checks, monkeypatch):
    """A changed signature (raises) or changed meaning (wrong numbers) in another torch version
    turns the fast path off instead of breaking the model."""
    monkeypatch.setattr(gemm, "packed_matmul", lambda *a: (_ for _ in ()).throw(TypeError("signature changed")))
    assert not gemm.mkl_packed_gemm() and not gemm.onednn_bf16_gemm()
    gemm.mkl_packed_gemm.cache_clear()
    monkeypatch.setattr(gemm, "packed_matmul", lambda kind, cols, packed, w, rows: torch.zeros(cols.shape[0], w.shape[0]))
    assert not gemm.mkl_packed_gemm()
    assert policy.packed_gemm(torch.float32) is None
