"""Training on the CPU is deterministic: one seed gives bitwise the same weights run to run, and a
run stopped part-way and resumed ends bitwise where an uninterrupted one does, with several
threads racing. The native EM kernel's backward adds its images' gradients in image order, not
in the order threads finish (capsviz/kernels/native/em_routing.cpp)."""

import threading

import pytest
import torch
from test_checkpoint_train import TINY
from test_kernels_native import _layer_outputs_and_grads

from capsviz import checkpoint as ckpt
from capsviz.kernels import native
from capsviz.layers import ClassCaps, ConvCaps, coordinate_grid
from capsviz.train import TrainRun, train

THREADS = 2  # at least two, so that the kernel's threads really race for images


@pytest.fixture(autouse=True)
def racing_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(max(THREADS, before))
    yield
    torch.set_num_threads(before)


@pytest.fixture
def native_on():
    if not native.available():
        pytest.skip(f"the native EM kernel is unavailable here ({native.reason()}); it is what these tests check")


def _weights(path):
    model, _ = ckpt.load_checkpoint(path)
    return model.state_dict()


def _assert_bitwise_equal(a, b):
    assert a.keys() == b.keys()
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    assert not differ, f"weights differ bitwise: {differ}"


def _stopped_and_resumed(run: TrainRun, out, after: int) -> None:
    """Train `run` into `out`, stopped after step `after`, then resumed to its end."""
    stop = threading.Event()

    def stop_after(e):
        if e.kind == "step" and e.step == after:
            stop.set()

    meta = train(run, out, on_event=stop_after, stop=stop)
    assert not meta.complete
    assert train(run, out, resume=out).complete


@pytest.fixture(params=["capsnet-small", "matrix-small"])
def model_name(request):
    """The CapsNet (Fourier and im2col convolutions, hand-written routing backward) and the
    matrix-capsule model on the native kernel. (Without the kernel, PyTorch's EM routing was
    found deterministic too, but trains too slowly for this file.)"""
    if request.param == "matrix-small":
        request.getfixturevalue("native_on")
    return request.param


def test_same_seed_same_weights_and_resume_is_exact(model_name, synthetic_data, tmp_path):
    """Two runs with one seed, and a third stopped mid-epoch and resumed: all bitwise equal.
    Batches of 32 take the CapsNet's PrimaryCaps through the Fourier path."""
    run = TrainRun(model=model_name, epochs=2, **dict(TINY, train_limit=64, test_limit=32))
    train(run, tmp_path / "a.safetensors")
    train(run, tmp_path / "b.safetensors")
    _stopped_and_resumed(run, tmp_path / "c.safetensors", after=1)  # 2 steps an epoch: stopped inside the first
    a = _weights(tmp_path / "a.safetensors")
    _assert_bitwise_equal(a, _weights(tmp_path / "b.safetensors"))
    _assert_bitwise_equal(a, _weights(tmp_path / "c.safetensors"))


@pytest.mark.parametrize("kind", ["conv", "class"])
def test_kernel_backward_is_bitwise_repeatable(kind, native_on):
    """The kernel's backward, ten times on the same inputs with threads racing for images: the
    gradients summed over images (W's, the betas') come out the same floats every time, and the
    same with one thread as with several."""
    torch.manual_seed(0)
    if kind == "conv":  # matrix-small's ConvCaps1
        layer = ConvCaps(in_types=8, out_types=16, kernel=3, stride=2, iterations=2, final_lambda=0.3)
        pose, a = torch.randn(24, 11, 11, 8, 16), torch.rand(24, 11, 11, 8)
    else:
        layer = ClassCaps(in_types=16, num_classes=10, iterations=2, final_lambda=0.3, coords=coordinate_grid(torch.linspace(0.1, 0.9, 3)))
        pose, a = torch.randn(96, 3, 3, 16, 16), torch.rand(96, 3, 3, 16)
    with torch.no_grad():
        layer.beta_u.normal_()
        layer.beta_a.normal_()
    first = _layer_outputs_and_grads(layer, pose, a)
    names = ["mu", "a", "poses' gradient", "a_in's", "W's", "beta_u's", "beta_a's"]
    for _ in range(9):
        again = _layer_outputs_and_grads(layer, pose, a)
        assert [n for n, x, y in zip(names, first, again, strict=True) if not torch.equal(x, y)] == []
    torch.set_num_threads(1)
    alone = _layer_outputs_and_grads(layer, pose, a)
    assert [n for n, x, y in zip(names, first, alone, strict=True) if not torch.equal(x, y)] == []
