import gzip
import time

import numpy as np
import pytest
import torch
from PIL import Image

from capsviz.data import batches, describe, load_split, multimnist
from capsviz.data.affine import affnist_like, expanded
from capsviz.data.idx import read_idx, write_idx
from capsviz.data.mnist import load_idx_pair, load_mnist
from capsviz.data.smallnorb import load_smallnorb, write_matrix
from capsviz.data.sources import SOURCES, Source, download, md5_of
from capsviz.data.transforms import mnist_style, picture_to_digit, random_shift
from capsviz.errors import CapsvizError


def test_idx_round_trip_gz_and_raw(tmp_path):
    a = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28)
    for name in ("x.gz", "x"):
        write_idx(tmp_path / name, a)
        np.testing.assert_array_equal(read_idx(tmp_path / name), a)


@pytest.fixture
def pair(tmp_path):
    imgs, labs = tmp_path / "train-images-idx3-ubyte.gz", tmp_path / "train-labels-idx1-ubyte.gz"
    write_idx(imgs, np.zeros((5, 28, 28), np.uint8))
    write_idx(labs, np.arange(5, dtype=np.uint8))
    return imgs, labs


def test_truncated_gzip(pair):
    imgs, labs = pair
    imgs.write_bytes(imgs.read_bytes()[:-20])
    with pytest.raises(CapsvizError, match=r"train-images.*corrupt or truncated gzip"):
        load_idx_pair(imgs, labs)


def test_wrong_magic(pair):
    imgs, labs = pair
    imgs.write_bytes(gzip.compress(b"\x12\x34\x08\x03" + bytes(100)))
    with pytest.raises(CapsvizError, match="not an IDX file"):
        load_idx_pair(imgs, labs)


def test_wrong_dimensions(pair):
    imgs, labs = pair
    write_idx(imgs, np.zeros((5, 32, 32), np.uint8))
    with pytest.raises(CapsvizError, match="expected 28x28 images, found 32x32"):
        load_idx_pair(imgs, labs)
    write_idx(imgs, np.zeros((5, 784), np.uint8))
    with pytest.raises(CapsvizError, match="expected 3-dimensional"):
        load_idx_pair(imgs, labs)


def test_count_mismatch(pair):
    imgs, labs = pair
    write_idx(labs, np.arange(4, dtype=np.uint8))
    with pytest.raises(CapsvizError, match="5 images but .* 4 labels"):
        load_idx_pair(imgs, labs)


def test_non_idx_file_with_the_right_name(pair):
    imgs, labs = pair
    imgs.write_bytes(b"<html>404 Not Found</html>")
    with pytest.raises(CapsvizError, match=r"train-images-idx3-ubyte.gz: not an IDX file"):
        load_idx_pair(imgs, labs)


def test_header_promises_more_than_the_file_holds(pair):
    imgs, labs = pair
    raw = gzip.decompress(imgs.read_bytes())
    imgs.write_bytes(raw[:-10])
    with pytest.raises(CapsvizError, match="header promises"):
        load_idx_pair(imgs, labs)


def test_missing_data_names_every_place_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(tmp_path / "envdir"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CapsvizError) as e:
        load_mnist("fashion-mnist", "test")
    msg = str(e.value)
    for place in ("envdir", "data", "cache", "/usr/share/datasets/fashion-mnist"):
        assert place in msg
    assert "python -m capsviz data --download" in msg and "apt install dataset-fashion-mnist" in msg
    # a folder asked for by name is the only place looked in: never silently another
    with pytest.raises(CapsvizError) as e:
        load_mnist("fashion-mnist", "test", data_dir=tmp_path / "given")
    assert "given" in str(e.value) and "envdir" not in str(e.value) and "cache" not in str(e.value)


def test_lookup_order_prefers_explicit_dir(synthetic_data, tmp_path):
    from synthetic import write_mnist

    mine = write_mnist(tmp_path / "mine", n_train=30, n_test=20)
    assert len(load_mnist("mnist", "train", mine)) == 30
    assert len(load_mnist("mnist", "train")) == 600  # from CAPSVIZ_DATA_DIR


def _mirror(tmp_path, content: dict[str, bytes]) -> str:
    m = tmp_path / "mirror"
    m.mkdir()
    for name, data in content.items():
        (m / (name + ".gz")).write_bytes(gzip.compress(data))
    return m.as_uri() + "/"


def test_download_tries_mirrors_verifies_and_writes_atomically(tmp_path):
    files = {"a": b"alpha" * 100, "b": b"beta" * 100}
    good = _mirror(tmp_path, files)
    src = Source("toy", {k: md5_of(v) for k, v in files.items()}, mirrors=("file:///nonexistent/", good))
    seen = []
    dest = download(src, tmp_path / "out", progress=lambda n, got, total: seen.append(n))
    assert sorted(p.name for p in dest.iterdir()) == ["a.gz", "b.gz"]
    assert set(seen) == {"a", "b"}


def test_download_with_wrong_content_leaves_nothing(tmp_path):
    bad = _mirror(tmp_path, {"a": b"tampered"})
    src = Source("toy", {"a": md5_of(b"the real thing")}, mirrors=(bad,))
    with pytest.raises(CapsvizError, match="checksum mismatch"):
        download(src, tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_real_mnist_matches_published_counts(real_data):
    train = load_split("mnist", "train")
    test = load_split("mnist", "test")
    assert torch.bincount(train.labels).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert torch.bincount(test.labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert abs(train.images.float().mean().item() - 33.318) < 1e-3
    assert train.images.element_size() * train.images.numel() < 300e6
    info = describe("mnist")
    assert info.train_size == 60000 and set(info.status.values()) == {"ok"}


def test_random_shift_moves_within_two_pixels_with_zero_padding():
    x = torch.zeros(64, 1, 28, 28)
    x[:, 0, 13, 13] = 1
    y = random_shift(x, 2, torch.Generator().manual_seed(0))
    pos = y.view(64, -1).argmax(1)
    dr, dc = pos // 28 - 13, pos % 28 - 13
    assert dr.abs().max() <= 2 and dc.abs().max() <= 2 and len(set(zip(dr.tolist(), dc.tolist(), strict=True))) > 10
    assert (y.sum((1, 2, 3)) == 1).all()


def test_multimnist_follows_the_paper():
    images, labels = torch.randint(0, 256, (200, 28, 28), dtype=torch.uint8), torch.arange(200) % 10
    mm = multimnist.MultiMNIST(images, labels, seed=3)
    b = mm.batch(300)
    assert b.images.shape == (300, 36, 36) and b.parts.shape == (300, 2, 36, 36)
    assert (b.labels[:, 0] != b.labels[:, 1]).all()
    assert b.shifts.abs().max() <= 4 and b.shifts.abs().max() == 4
    assert b.images.max() <= 1.0
    torch.testing.assert_close(b.images, b.parts.sum(1).clamp(max=1))
    assert (b.parts.sum(1) > 1).any()  # overlaps really get clipped
    # each part is the source digit shifted: same ink
    torch.testing.assert_close(b.parts[:, 0].sum((1, 2)), images[b.index[:, 0]].float().div(255).sum((1, 2)))
    again = multimnist.MultiMNIST(images, labels, seed=3).batch(300)
    torch.testing.assert_close(again.images, b.images)
    idx, shifts = mm.eval_set(pairs_per_digit=3, seed=1)
    assert len(idx) == 600 and (torch.bincount(idx[:, 0]) == 3).all()
    idx2, _ = multimnist.MultiMNIST(images, labels, seed=99).eval_set(pairs_per_digit=3, seed=1)
    assert torch.equal(idx, idx2)  # fixed by its own seed, not the training stream


def test_affine_data_stays_on_the_40px_canvas():
    digits = torch.zeros(50, 28, 28, dtype=torch.uint8)
    digits[:, 6:22, 10:18] = 255
    e = expanded(digits, torch.Generator().manual_seed(0))
    assert e.shape == (50, 40, 40)
    torch.testing.assert_close(e.sum((1, 2)), torch.full((50,), 128.0))
    a = affnist_like(digits, seed=0)
    b = affnist_like(digits, seed=0)
    assert a.shape == (50, 40, 40) and torch.equal(a, b)
    ink = a.sum((1, 2))
    assert (ink > 60).all() and (ink < 220).all()  # scaled by 0.8-1.2 per axis, none lost off-canvas
    assert not torch.equal(a[0], a[1])


def _norb_folder(tmp_path, n=40):
    rng = np.random.default_rng(0)
    for split, tag in (("training", "46789"), ("testing", "01235")):
        base = f"smallnorb-5x{tag}x9x18x6x2x96x96-{split}"
        write_matrix(tmp_path / f"{base}-dat.mat", rng.integers(0, 256, (n, 2, 96, 96), dtype=np.uint8))
        write_matrix(tmp_path / f"{base}-cat.mat", (np.arange(n) % 5).astype(np.int32))
        info = np.stack([np.arange(n) % 10, np.arange(n) % 9, (np.arange(n) * 2) % 36, np.arange(n) % 6], 1).astype(np.int32)
        write_matrix(tmp_path / f"{base}-info.mat", info)
    return tmp_path


def test_smallnorb_reader(tmp_path):
    folder = _norb_folder(tmp_path)
    data = load_smallnorb(folder, "training")
    assert data.images.shape == (40, 96, 96) and data.labels.tolist()[:6] == [0, 1, 2, 3, 4, 0]
    (folder / "smallnorb-5x46789x9x18x6x2x96x96-training-cat.mat").write_bytes(b"\x00" * 12)
    with pytest.raises(CapsvizError, match="not a smallNORB matrix file"):
        load_smallnorb(folder, "training")


def test_batches_are_deterministic_and_resumable(synthetic_data):
    data = load_split("mnist", "train")
    full = [x for x, _, _ in batches("mnist", data, 64, train=True, seed=1, epoch=2)]
    tail = [x for x, _, _ in batches("mnist", data, 64, train=True, seed=1, epoch=2, start=3)]
    for a, b in zip(full[3:], tail, strict=True):
        torch.testing.assert_close(a, b)
    other = next(batches("mnist", data, 64, train=True, seed=1, epoch=3))[0]
    assert not torch.equal(full[0], other)
    x, y, target = next(batches("mnist", data, 8, train=True, seed=0))
    assert target is x  # a single digit's decoder redraws the input
    x, y, parts = next(batches("multimnist", data, 16, train=True, seed=0))
    assert x.shape == (16, 1, 36, 36) and y.shape == (16, 2) and parts.shape == (16, 2, 36, 36)
    torch.testing.assert_close(parts.sum(1).clamp(max=1), x[:, 0])  # the digits apart, as the paper's decoder targets


def test_sources_have_known_checksums():
    assert set(SOURCES) == {"mnist", "fashion-mnist"}
    for s in SOURCES.values():
        assert len(s.files) == 4 and all(len(v) == 32 for v in s.files.values()) and s.mirrors


def test_mnist_style_fits_ink_in_20px_and_centres_it():
    from capsviz.data.transforms import mnist_style

    img = np.zeros((280, 280), np.float32)
    img[20:200, 30:60] = 1.0  # a tall bar off in the corner
    out = mnist_style(img)
    ys, xs = np.nonzero(out > 0.1)
    assert out.shape == (28, 28) and ys.max() - ys.min() + 1 <= 20
    cy, cx = (out.sum(1) * np.arange(28)).sum() / out.sum(), (out.sum(0) * np.arange(28)).sum() / out.sum()
    assert abs(cy - 14) < 1.5 and abs(cx - 14) < 1.5
    assert mnist_style(np.zeros((10, 10), np.float32)).max() == 0


def test_smallnorb_is_found_in_the_usual_places_and_listed_by_the_cli(tmp_path, monkeypatch, capsys):
    from capsviz.cli import main
    from capsviz.data import smallnorb

    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert smallnorb.locate()[0] is None
    main(["data"])
    assert "smallnorb: NOT FOUND" in capsys.readouterr().out
    (tmp_path / "smallnorb").mkdir()
    _norb_folder(tmp_path / "smallnorb", n=10)
    assert smallnorb.locate()[0] == tmp_path / "smallnorb"
    main(["data"])
    assert "'training': 10, 'testing': 10" in capsys.readouterr().out


def test_smallnorb_download_checks_each_file_by_parsing_it(tmp_path):
    import dataclasses
    import gzip

    from capsviz.data import smallnorb
    from capsviz.data.sources import download

    (tmp_path / "good_src").mkdir()
    good = _norb_folder(tmp_path / "good_src", n=4)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for f in good.iterdir():
        (mirror / (f.name + ".gz")).write_bytes(gzip.compress(f.read_bytes()))
    src = dataclasses.replace(smallnorb.NORB_SOURCE, mirrors=(mirror.as_uri() + "/",))
    dest = download(src, tmp_path / "out")
    assert len(smallnorb.load_smallnorb(dest, "testing").labels) == 4
    (mirror / "smallnorb-5x01235x9x18x6x2x96x96-testing-cat.mat.gz").write_bytes(gzip.compress(b"<html>moved</html>"))
    with pytest.raises(CapsvizError, match="not a smallNORB matrix file"):
        download(src, tmp_path / "out2")
    assert not list((tmp_path / "out2").glob("*testing-cat*"))


def test_prefetch_yields_the_same_batches_raises_producer_errors_and_stops_early():
    import threading

    from capsviz.data import prefetch

    assert list(prefetch(iter(range(50)), depth=3)) == list(range(50))

    def broken():
        yield 1
        raise ValueError("bad batch")

    got = []
    with pytest.raises(ValueError, match="bad batch"):
        for item in prefetch(broken()):
            got.append(item)
    assert got == [1]

    produced = []

    def endless():
        i = 0
        while True:
            produced.append(i)
            yield i
            i += 1

    feed = prefetch(endless(), depth=2)
    assert [next(feed) for _ in range(3)] == [0, 1, 2]
    feed.close()  # what leaving a for loop early does
    n = len(produced)
    assert not any(t.name == "capsviz-prefetch" and t.is_alive() for t in threading.enumerate())
    assert len(produced) == n <= 3 + 2 + 1  # the producer ran at most depth (+ one in hand) ahead

    short = prefetch(iter(range(3)), depth=2)
    assert next(short) == 0
    time.sleep(0.3)  # the producer has filled the queue and waits to say it is done
    t0 = time.monotonic()
    short.close()
    assert time.monotonic() - t0 < 1 and not any(t.name == "capsviz-prefetch" and t.is_alive() for t in threading.enumerate())


def _encoded(img, fmt="PNG", **kw) -> bytes:
    import io

    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def _seven(size: int = 100) -> np.ndarray:
    """A '7' as a boolean (size, size) mask: a top bar and a diagonal down to the left."""
    m = np.zeros((size, size), bool)
    m[15:25, 20:80] = True
    for r in range(25, 90):
        c = 80 - int((r - 25) * 0.6)
        m[r, c - 5 : c + 5] = True
    return m


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda m: Image.fromarray((m * 255).astype(np.uint8)), id="white-on-black"),
        pytest.param(lambda m: Image.fromarray(((~m) * 255).astype(np.uint8)), id="black-on-white"),
        pytest.param(
            lambda m: Image.fromarray(np.stack([(160 - m * 130 + np.arange(100) * 0.4).astype(np.uint8)] * 3, -1)), id="photo-grey-paper"
        ),
        pytest.param(
            lambda m: Image.fromarray(np.dstack([np.zeros(m.shape + (3,), np.uint8), (m * 255).astype(np.uint8)]), "RGBA"),
            id="black-on-transparent",
        ),
        pytest.param(lambda m: Image.fromarray((m * 60000).astype(np.uint16)), id="16-bit"),
        pytest.param(lambda m: Image.fromarray((m * 255).astype(np.uint8)).convert("P"), id="palette"),
    ],
)
def test_an_uploaded_picture_becomes_the_same_mnist_style_digit(make):
    want = mnist_style(_seven().astype(np.float32))
    got = picture_to_digit(_encoded(make(_seven())))
    assert got.shape == (28, 28) and got.dtype == np.float32 and 0 <= got.min() and got.max() <= 1
    assert np.abs(got - want).mean() < 0.03, "the same digit, whatever the picture's mode and background"


def test_an_upload_is_turned_upright_by_its_exif_orientation():
    upright = Image.fromarray((_seven() * 255).astype(np.uint8))
    stored = upright.transpose(Image.Transpose.ROTATE_90)  # as a camera stores a portrait shot
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to view
    got = picture_to_digit(_encoded(stored, "JPEG", exif=exif, quality=95))
    want = mnist_style(_seven().astype(np.float32))
    assert np.abs(got - want).mean() < 0.04
    assert np.abs(picture_to_digit(_encoded(stored, "JPEG", quality=95)) - want).mean() > 0.1  # without the tag it stays sideways


@pytest.mark.parametrize(
    "data, says",
    [
        (b"", "not a picture"),
        (b"hello, this is text", "not a picture"),
        (_encoded(Image.fromarray(np.full((40, 40), 255, np.uint8)))[:60], "not a picture"),
        (_encoded(Image.new("L", (50, 50), 255)), "looks blank"),
        (_encoded(Image.new("RGBA", (50, 50), (0, 0, 0, 0))), "looks blank"),
        (_encoded(Image.new("1", (8000, 6000))), "8000x6000 pixels"),
    ],
    ids=["empty", "text", "truncated", "blank-white", "all-transparent", "too-large"],
)
def test_odd_uploads_get_a_clear_message(data, says):
    with pytest.raises(CapsvizError, match=says):
        picture_to_digit(data)


def test_a_decompression_bomb_is_refused_before_it_is_decoded():
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 0, 0, 0, 0)  # 10 gigapixels, declared in a few bytes
    bomb = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b"")
    with pytest.raises(CapsvizError, match="too large"):
        picture_to_digit(bomb)
