import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED_DATA = ROOT.parent / "shared" / "data"

from capsviz.data.idx import write_idx  # noqa: E402


def synthetic_digits(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Learnable stand-ins for MNIST: class k is a bright bar at row 2 + 2k, plus noise."""
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) % 10).astype(np.uint8)
    rng.shuffle(labels)
    images = (rng.random((n, 28, 28)) * 40).astype(np.uint8)
    for i, k in enumerate(labels):
        r = 2 + 2 * int(k)
        images[i, r : r + 2, 4:24] = 255
    return images, labels


def write_mnist(folder: Path, n_train: int = 600, n_test: int = 200) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, n, seed in (("train", n_train, 0), ("t10k", n_test, 1)):
        images, labels = synthetic_digits(n, seed)
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", labels)
    return folder


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory) -> Path:
    """A data folder laid out like ../shared/data, with synthetic MNIST and Fashion-MNIST."""
    root = tmp_path_factory.mktemp("data")
    write_mnist(root / "mnist")
    write_mnist(root / "fashion-mnist")
    return root


@pytest.fixture
def synthetic_data(synthetic_root, monkeypatch, tmp_path):
    """CAPSVIZ_DATA_DIR -> synthetic data; cwd and cache moved away from real data."""
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(synthetic_root))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return synthetic_root


@pytest.fixture
def real_data(monkeypatch):
    """The real datasets in ../shared/data: skipped where absent, required in CI."""
    if not (SHARED_DATA / "mnist").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the real data at {SHARED_DATA}")
        pytest.skip("real data not present (../shared/data)")
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(SHARED_DATA))
    return SHARED_DATA
