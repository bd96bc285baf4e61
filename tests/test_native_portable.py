"""The native EM kernel builds with every GCC (9+) and clang found here, with or without OpenMP,
agrees with PyTorch each time, and says in one line why it is off when it cannot be built."""

import shutil
import stat

import pytest
import torch

from capsviz.config import preset
from capsviz.kernels import native
from capsviz.models import build_model

COMPILERS = [c for c in ("g++", "g++-9", "g++-10", "g++-11", "g++-12", "g++-13", "clang++", "clang++-14", "clang++-15") if shutil.which(c)]


@pytest.fixture
def fresh_kernel(monkeypatch, tmp_path):
    """A kernel state of its own, built into an empty cache."""
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", None)
    monkeypatch.setattr(native, "_note", "")
    monkeypatch.setenv("CAPSVIZ_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CAPSVIZ_NATIVE", raising=False)
    return tmp_path


def routed_with_and_without_the_kernel(monkeypatch):
    torch.manual_seed(0)
    model = build_model(preset("matrix-small", in_size=28, num_classes=10, A=8, B=4, C=4, D=4)).eval()
    x = torch.rand(3, 1, 28, 28)
    with torch.no_grad():
        assert native.available(), native.reason()
        fast = model(x).scores
        with monkeypatch.context() as m:
            m.setattr(native, "_lib", None)
            m.setattr(native, "_why", "off")
            slow = model(x).scores
    return fast, slow


def fake_compiler(folder, script: str) -> str:
    path = folder / "fake-c++"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.mark.skipif(not COMPILERS, reason="no C++ compiler")
@pytest.mark.parametrize("cxx", COMPILERS)
def test_every_compiler_found_builds_the_kernel_and_it_agrees_with_pytorch(cxx, fresh_kernel, monkeypatch):
    monkeypatch.setenv("CXX", cxx)
    fast, slow = routed_with_and_without_the_kernel(monkeypatch)
    assert native.status().startswith("on") and native.SUFFIX in native.status()
    torch.testing.assert_close(fast, slow, rtol=2e-4, atol=2e-4)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
def test_a_compiler_without_openmp_still_builds_a_one_thread_kernel(fresh_kernel, monkeypatch):
    """Apple's clang has no -fopenmp: the kernel is built without it and says so."""
    gxx = shutil.which("g++")
    cxx = fake_compiler(
        fresh_kernel,
        f'for a in "$@"; do [ "$a" = -fopenmp ] && {{ echo "clang: error: unsupported option -fopenmp" >&2; exit 1; }}; done\nexec {gxx} "$@"\n',
    )
    monkeypatch.setenv("CXX", cxx)
    fast, slow = routed_with_and_without_the_kernel(monkeypatch)
    assert "one thread" in native.status()
    torch.testing.assert_close(fast, slow, rtol=2e-4, atol=2e-4)


def test_a_failed_build_says_why_in_one_line(fresh_kernel, monkeypatch):
    cxx = fake_compiler(
        fresh_kernel, 'echo "em_routing.cpp:1:1: warning: something" >&2\necho "em_routing.cpp:63:10: error: no such builtin" >&2\nexit 1\n'
    )
    monkeypatch.setenv("CXX", cxx)
    assert not native.available()
    assert native.reason() == "fake-c++ could not build it: em_routing.cpp:63:10: error: no such builtin"
    assert native.status().startswith("off (fake-c++ could not build it") and "slower" in native.status()
