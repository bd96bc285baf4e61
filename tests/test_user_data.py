"""Your own images: folder, npz and CIFAR-10 readers, models for any size and channels, the
estimate's refusal, and hostile zips (path escape, zip bomb, 100,000 files, a fake picture)."""

import io
import struct
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from capsviz.checkpoint import load_checkpoint
from capsviz.cli import main
from capsviz.config import TrainRun
from capsviz.data import load_split
from capsviz.data.idx import read_idx
from capsviz.data.names import MAX_DISPLAY_NAME, name_file
from capsviz.data.upload import ZipLimits, receive_zip
from capsviz.data.user import load_user, short_name
from capsviz.errors import CapsvizError
from capsviz.estimate import GiB, estimate, for_preset, refusal
from capsviz.models import build_model
from capsviz.train import train

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data beside the checkout

COLOURS = ("blue", "green", "red", "yellow")


def shapes(n_per_class: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """32x32 RGB: class k is a bright square of colour COLOURS[k] at a random place, on dim noise."""
    rng = np.random.default_rng(seed)
    rgb = {"blue": (0, 0, 255), "green": (0, 255, 0), "red": (255, 0, 0), "yellow": (255, 255, 0)}
    images, labels = [], []
    for k, name in enumerate(COLOURS):
        for _ in range(n_per_class):
            a = (rng.random((32, 32, 3)) * 50).astype(np.uint8)
            r, c = rng.integers(2, 16, 2)
            a[r : r + 14, c : c + 14] = rgb[name]
            images.append(a)
            labels.append(k)
    return np.stack(images), np.array(labels)


def write_folder(root, images, labels, names, split=""):
    for i, (a, k) in enumerate(zip(images, labels, strict=True)):
        folder = root / split / names[k]
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(a).save(folder / f"{i:05d}.png")
    return root


def test_fashion_mnist_folder_reads_back_as_the_idx_reader_does(tmp_path):
    place = SHARED_DATA / "fashion-mnist"
    if not place.is_dir():
        pytest.skip("real data not present (../shared/data)")
    names = [
        f"{k}_{n.replace('/', '-')}"
        for k, n in enumerate(("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"))
    ]
    splits = {}
    for split, prefix, n in (("train", "train", 300), ("test", "t10k", 100)):
        x = read_idx(place / f"{prefix}-images-idx3-ubyte.gz")[:n]
        y = read_idx(place / f"{prefix}-labels-idx1-ubyte.gz")[:n]
        write_folder(tmp_path, x, y, names, split)
        splits[split] = (x, y)
    data = load_user(f"folder:{tmp_path}")
    assert data.classes == tuple(names) and data.channels == 1 and data.size == 28
    for split, got in (("train", data.train), ("test", data.test)):
        x, y = splits[split]
        order = np.argsort(y, kind="stable")  # the folder reads class by class, each in file order
        assert got.images.shape == (len(y), 1, 28, 28)
        assert torch.equal(got.images[:, 0], torch.from_numpy(x[order].copy()))
        assert torch.equal(got.labels, torch.from_numpy(y[order].astype(np.int64)))


def test_folder_split_skips_and_colour(tmp_path):
    images, labels = shapes(12)
    write_folder(tmp_path, images, labels, COLOURS)
    Image.fromarray(images[0].mean(2).astype(np.uint8)).resize((40, 40)).save(tmp_path / "red" / "grey.png")  # grey, another size
    (tmp_path / "red" / "fake.png").write_text("not a picture")
    (tmp_path / "red" / "notes.txt").write_text("hello")
    data = load_user(f"folder:{tmp_path}")
    assert data.channels == 3 and data.size == 32 and data.classes == COLOURS
    assert len(data.test) == 4 * 2 and len(data.train) == 4 * 10 + 1
    assert data.skipped == {"unreadable": 1, "not an image (PNG, JPEG, BMP)": 1}
    assert any(n.startswith("no test folder: 8 of 49 images held out by a fixed split") for n in data.notes)
    assert any("1 grey images of 49 made colour" in n for n in data.notes)
    assert torch.equal(load_user(f"folder:{tmp_path}").test.labels, data.test.labels)  # the same split every time
    assert load_user(f"folder:{tmp_path}", resize=16).train.images.shape[1:] == (3, 16, 16)


def test_a_small_capsnet_learns_colour_shapes(tmp_path):
    images, labels = shapes(60)
    write_folder(tmp_path / "shapes", images, labels, COLOURS)
    run = TrainRun(model="capsnet-small", dataset=f"folder:{tmp_path / 'shapes'}", epochs=2, batch_size=16, lr=3e-3)
    meta = train(run, tmp_path / "m.safetensors")
    assert meta.metrics.test_accuracy > 60, meta.metrics  # chance is 25%
    assert meta.class_names == COLOURS and meta.raw["image"] == {"size": 32, "channels": 3}
    model, _ = load_checkpoint(tmp_path / "m.safetensors")
    assert model.config.in_channels == 3 and model.config.num_classes == 4
    x = load_split(run.dataset, "test").images[:2].float() / 255
    assert model(x).reconstruction.shape == (2, 3, 32, 32)


@pytest.mark.parametrize("name", ["capsnet-small", "efficient-capsnet", "matrix-small", "cnn-small", "cnn-mnist"])
def test_every_family_takes_any_size_and_channels(name):
    kw = dict(conv1_channels=8, primary_types=2) if name == "capsnet-small" else dict(A=8, B=2, C=2, D=2) if name == "matrix-small" else {}
    model = build_model(for_preset(name, 36, 3, 5, **kw))
    x, y = torch.rand(2, 3, 36, 36), torch.tensor([0, 4])
    out = model(x, y)
    assert out.scores.shape == (2, 5)
    if out.reconstruction is not None:
        assert out.reconstruction.shape == (2, 3, 36, 36)
    model.loss(out, y, x).backward()


def test_npz_reader(tmp_path):
    x = np.random.default_rng(0).integers(0, 256, (30, 20, 24), dtype=np.uint8)
    y = np.arange(30) % 3
    np.savez(tmp_path / "a.npz", images=x, labels=y, class_names=np.array(["a", "b", "c"]), test_images=x[:6], test_labels=y[:6])
    data = load_user(f"npz:{tmp_path / 'a.npz'}")
    assert data.classes == ("a", "b", "c") and len(data.train) == 30 and len(data.test) == 6 and data.size == 20
    assert torch.equal(data.train.images[0, 0], torch.from_numpy(x[0, :, 2:22]))  # centre-cropped to a square
    np.savez(tmp_path / "f.npz", images=np.random.default_rng(1).random((24, 16, 16, 3)), labels=np.arange(24) % 2)
    data = load_user(f"npz:{tmp_path / 'f.npz'}", resize=8)
    assert data.channels == 3 and data.train.images.shape[1:] == (3, 8, 8) and len(data.test) == 4 and data.classes == ("0", "1")
    np.savez(tmp_path / "bad.npz", pictures=x)
    with pytest.raises(CapsvizError, match="needs arrays named images and labels"):
        load_user(f"npz:{tmp_path / 'bad.npz'}")


def test_cifar10_binary_reader(tmp_path):
    def batch(n, seed):
        rng = np.random.default_rng(seed)
        rec = np.zeros((n, 3073), np.uint8)
        rec[:, 0] = np.arange(n) % 10
        rec[:, 1:] = rng.integers(0, 256, (n, 3072))
        return rec

    train_rec, test_rec = batch(30, 0), batch(10, 1)
    train_rec.tofile(tmp_path / "data_batch_1.bin")
    test_rec.tofile(tmp_path / "test_batch.bin")
    (tmp_path / "batches.meta.txt").write_text(
        "\n".join(["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]) + "\n\n"
    )
    data = load_user(f"cifar10:{tmp_path}")
    assert data.classes[3] == "cat" and len(data.train) == 30 and len(data.test) == 10 and data.channels == 3 and data.size == 32
    assert torch.equal(data.train.images[5], torch.from_numpy(train_rec[5, 1:].reshape(3, 32, 32)))  # red, green, blue planes
    assert data.train.labels.tolist() == (np.arange(30) % 10).tolist()
    (tmp_path / "test_batch.bin").write_bytes(b"\0" * 100)
    with pytest.raises(CapsvizError, match="not a whole number"):
        load_user(f"cifar10:{tmp_path}")


def test_estimate_refuses_a_full_capsnet_at_224(tmp_path):
    cfg = for_preset("capsnet", 224, 3, 10)
    est = estimate(cfg, 128, available=10 * GiB, time_it=False)
    assert not est.fits and est.routing > 20 * GiB
    line = refusal(est, cfg, can_resize=True)
    assert line.startswith("224x224 needs about") and "10 GiB are free" in line and "try --resize" in line
    small = for_preset("capsnet-small", 28)
    assert estimate(small, 16, available=10 * GiB, time_it=False).fits


def test_cli_refuses_in_one_line(tmp_path, capsys):
    images, labels = shapes(3)
    write_folder(tmp_path / "s", images, labels, COLOURS)
    code = main(
        [
            "train",
            "--model",
            "capsnet",
            "--dataset",
            f"folder:{tmp_path / 's'}",
            "--resize",
            "224",
            "--out",
            str(tmp_path / "m.safetensors"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len([e for e in err if e.startswith("error:")]) == 1
    assert "224x224 needs about" in err[-1] and "try " in err[-1]
    assert main(["train", "--dataset", "foo:/x", "--out", str(tmp_path / "m.safetensors")]) == 2


# -- zips ------------------------------------------------------------------------------------------


def png(colour=(255, 0, 0), size=8) -> bytes:
    b = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(b, "PNG")
    return b.getvalue()


def make_zip(members: dict) -> bytes:
    """The same members make the same bytes: each member dated alike, not by the clock (a zip's
    digest names its upload, and two calls may fall either side of a two-second tick)."""
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data, compress_type=zipfile.ZIP_DEFLATED)
    return b.getvalue()


def test_a_good_zip_is_summed_up(tmp_path):
    members = {f"pets/{c}/{i}.png": png(col) for c, col in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))) for i in range(6)}
    members["pets/cat/fake.png"] = b"this is text"
    members["pets/readme.txt"] = b"hi"
    members["__MACOSX/pets/._x.png"] = b"junk"
    s = receive_zip(make_zip(members), tmp_path / "up")
    assert s.classes == ("cat", "dog") and s.size == 8 and s.channels == 3
    assert s.train_counts == {"cat": 5, "dog": 5} and s.test_counts == {"cat": 1, "dog": 1}
    assert s.skipped == {"unreadable": 1, "not in a class folder": 1, "hidden": 1}
    assert len(s.samples) == 4 and s.samples[0][1].shape == (8, 8, 3)
    assert receive_zip(make_zip(members), tmp_path / "up").skipped == s.skipped  # unpacked once, read again


def pets_zip() -> bytes:
    return make_zip({f"{c}/{i}.png": png(col) for c, col in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))) for i in range(3)})


def test_an_uploaded_zip_is_shown_by_its_file_name(tmp_path):
    s = receive_zip(pets_zip(), tmp_path / "up", filename="shapes.zip")
    folder = Path(s.spec.removeprefix("folder:"))
    assert short_name(s.spec) == "shapes" and name_file(folder).parent == tmp_path / "up"
    assert receive_zip(pets_zip(), tmp_path / "up", filename="other.zip").spec == s.spec
    assert short_name(s.spec) == "shapes"  # the same zip again keeps the name its models were trained under
    assert short_name(f"folder:{tmp_path / 'photos'}") == "folder:photos"  # a folder of one's own, as before
    assert short_name("mnist") == "mnist"


@pytest.mark.parametrize(
    "filename",
    [
        "",
        ".zip",
        "../../etc/passwd",
        "C:\\Users\\me\\",
        "a\x00b\x1b[31m\nc.zip",
        "x" * 5000 + ".zip",
        "\u202e\t .zip",
        "[a](javascript:x).zip",
    ],
)
def test_an_odd_zip_file_name_gives_a_clean_name(tmp_path, filename):
    s = receive_zip(pets_zip(), tmp_path / "up", filename=filename)
    name = short_name(s.spec)
    assert name and name.isprintable() and len(name) <= MAX_DISPLAY_NAME and "/" not in name and "\\" not in name
    assert not any(ch in name for ch in "[]<>`$")
    made = sorted(p.name for p in (tmp_path / "up").iterdir() if not p.name.startswith("."))  # .state/: locks and owners
    assert made == sorted([Path(s.spec).name, Path(s.spec).name + ".name"])


def test_a_tampered_name_file_is_cleaned_again(tmp_path):
    s = receive_zip(pets_zip(), tmp_path / "up", filename="pets.zip")
    name_file(Path(s.spec.removeprefix("folder:"))).write_bytes(b"../\xff\x1b]evil\n" + b"y" * 10_000)
    name = short_name(s.spec)
    assert name.isprintable() and len(name) <= MAX_DISPLAY_NAME and "/" not in name
    name_file(Path(s.spec.removeprefix("folder:"))).write_bytes(b"")
    assert short_name(s.spec) == f"folder:{Path(s.spec).name}"  # nothing usable: the folder's own name


@pytest.mark.parametrize("name", ["../evil/x.png", "/etc/x.png", "a/../../x.png", "C:/x.png", "a\\..\\..\\x.png"])
def test_a_zip_reaching_outside_its_folder_is_refused(tmp_path, name):
    with pytest.raises(CapsvizError, match="outside its folder"):
        receive_zip(make_zip({"a/b.png": png(), name: png()}), tmp_path / "up")
    assert not (tmp_path / "evil").exists() and not (tmp_path / "x.png").exists()


def test_a_symlink_in_a_zip_is_refused(tmp_path):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        info = zipfile.ZipInfo("a/link.png")
        info.external_attr = 0o120777 << 16
        z.writestr(info, "/etc/passwd")
    with pytest.raises(CapsvizError, match="symbolic link"):
        receive_zip(b.getvalue(), tmp_path / "up")


def test_zip_bombs_are_caught_by_headers_and_while_reading(tmp_path):
    limits = ZipLimits(total=8 * 2**20, member=4 * 2**20)
    zeros = b"\0" * (16 * 2**20)
    bomb = make_zip({"s/a/x.png": zeros, "s/b/y.png": png()})
    assert len(bomb) < 100_000
    with pytest.raises(CapsvizError, match="expands to"):
        receive_zip(bomb, tmp_path / "up", limits)
    # the same member with headers that declare 1,000 bytes: caught while reading
    info = zipfile.ZipFile(io.BytesIO(bomb)).infolist()[0]
    lying = bytearray(bomb)
    for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        pos = bytes(lying).find(sig)
        assert struct.unpack_from("<L", lying, pos + at)[0] == info.file_size
        struct.pack_into("<L", lying, pos + at, 1000)
    with pytest.raises(CapsvizError, match="crafted zip"):
        receive_zip(bytes(lying), tmp_path / "up", limits)
    assert not any((tmp_path / "up").glob("*/a/*"))


def many_files_zip(n: int) -> bytes:
    """A zip of n empty files, written directly (zipfile takes seconds for 100,000), zip64 records included."""
    names = [f"a/{i:06d}.png".encode() for i in range(n)]
    local = [struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 33, 0, 0, 0, len(m), 0) + m for m in names]
    offsets = np.cumsum([0] + [len(x) for x in local[:-1]]).tolist()
    central = [
        struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 33, 0, 0, 0, len(m), 0, 0, 0, 0, 0, o) + m
        for m, o in zip(names, offsets, strict=True)
    ]
    body, cd = b"".join(local), b"".join(central)
    z64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, len(cd), len(body))
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, len(body) + len(cd), 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, len(cd), len(body), 0)
    return body + cd + z64 + locator + end


def test_a_zip_of_100000_files_is_refused_fast(tmp_path):
    data = many_files_zip(100_000)
    assert len(zipfile.ZipFile(io.BytesIO(data)).infolist()) == 100_000  # a real zip
    t0 = time.perf_counter()
    with pytest.raises(CapsvizError, match="100,000 entries"):
        receive_zip(data, tmp_path / "up")
    assert time.perf_counter() - t0 < 0.5
    assert not (tmp_path / "up").exists()


def test_a_non_image_named_png_and_a_non_zip(tmp_path):
    with pytest.raises(CapsvizError, match="no readable PNG"):
        receive_zip(make_zip({"a/x.png": b"text", "b/y.png": b"<html>"}), tmp_path / "up")
    with pytest.raises(CapsvizError, match="not a zip file"):
        receive_zip(b"just some bytes", tmp_path / "up")
