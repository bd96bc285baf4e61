"""A served class's data, tried as a hostile student would: crafted zips (bloated pictures, huge
pictures, an end record that lies), the same zip from many students at once, a crash half way
through an unpack, uploads that would fill the disk; and the command line's odd files."""

import io
import os
import struct
import threading
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_user_data import make_zip

from capsviz.cli import main
from capsviz.data import upload, user
from capsviz.data.names import hide_paths, is_digest
from capsviz.data.upload import PART, STATE_DIR, QuotaError, ZipLimits, receive_zip
from capsviz.errors import CapsvizError
from capsviz.estimate import size_refusal

MiB = 2**20


def png(value: int, size: int = 8, mode: str = "L", extra: bytes = b"") -> bytes:
    """A PNG; `extra`, a private ancillary chunk's content, put before the image data."""
    b = io.BytesIO()
    Image.new(mode, (size, size), value).save(b, "PNG")
    data = b.getvalue()
    if extra:
        chunk = struct.pack(">I", len(extra)) + b"prVt" + extra + struct.pack(">I", zlib.crc32(b"prVt" + extra))
        at = data.index(b"IDAT") - 4
        data = data[:at] + chunk + data[at:]
    return data


def shapes_zip(per_class: int = 6, size: int = 8, seed: int = 0, extra: bytes = b"") -> bytes:
    return make_zip(
        {f"s/{c}/{seed}-{i}.png": png(40 * k + i + seed, size, extra=extra) for k, c in enumerate("abc") for i in range(per_class)}
    )


def stored(uploads: Path) -> int:
    return sum(f.stat().st_size for f in uploads.rglob("*") if f.is_file())


# -- the disk ------------------------------------------------------------------------------------


def test_pictures_bloated_with_ancillary_chunks_are_stored_compactly(tmp_path):
    """The attack: valid PNGs each carrying 4 MB of a private chunk, 240 MB in a zip of about
    0.25 MB. Stored, they take what their pixels need."""
    data = shapes_zip(per_class=20, extra=b"\0" * (4 * MiB))
    assert len(data) < 0.5 * MiB
    s = receive_zip(data, tmp_path / "up")
    assert sum(s.train_counts.values()) + sum(s.test_counts.values()) == 60
    assert stored(tmp_path / "up") < 200_000  # not the 240 MB the members expand to
    pictures = list((tmp_path / "up").glob("*/*/*.png"))
    assert len(pictures) == 60 and all(p.stat().st_size < 1000 for p in pictures)
    with Image.open(pictures[0]) as im:
        assert im.size == (8, 8) and im.mode == "L" and b"prVt" not in pictures[0].read_bytes()


def test_a_large_photo_is_stored_at_most_max_size_on_its_shorter_side(tmp_path):
    from capsviz.config import MAX_SIZE

    big = io.BytesIO()
    Image.new("RGB", (1600, 1200), (200, 10, 10)).save(big, "JPEG")
    s = receive_zip(make_zip({"a/1.jpg": big.getvalue(), "a/2.jpg": big.getvalue(), "b/1.png": png(9, 64, "RGB")}), tmp_path / "up")
    assert s.channels == 3
    sizes = sorted(Image.open(p).size for p in (tmp_path / "up").glob("*/a/*.png"))
    assert sizes == [(683, MAX_SIZE), (683, MAX_SIZE)]


def test_pixels_are_bounded_per_picture_and_per_zip_from_the_headers(tmp_path):
    huge = png(0, 6000)  # 36 megapixels of one value: a few KB
    assert len(huge) < 200_000
    s = receive_zip(make_zip({"a/h.png": huge, **{f"{c}/{i}.png": png(i, 8) for c in "ab" for i in range(3)}}), tmp_path / "up")
    assert s.skipped == {"over 24 megapixels": 1}
    decoded = []
    real = upload.compact_picture

    def counting(content, limits, left):
        out = real(content, limits, left)
        decoded.append(out[1])
        return out

    limits = ZipLimits(pixels=1_000_000)
    many = make_zip({f"{c}/{i}.png": png(i, 300) for c in "ab" for i in range(20)})  # 40 x 90,000 pixels
    upload.compact_picture = counting
    try:
        with pytest.raises(CapsvizError, match="more than 1 megapixels in all"):
            receive_zip(many, tmp_path / "up2", limits)
    finally:
        upload.compact_picture = real
    assert sum(decoded) <= 1_000_000 and len(decoded) <= 12  # the one past the budget is refused by its header
    assert not (tmp_path / "up2").exists() or not any(p.name[0] != "." for p in (tmp_path / "up2").iterdir())


def lying_zip(real: int, declared: int) -> bytes:
    data = bytearray(make_zip({f"a/{i}.png": b"x" for i in range(real)}))
    end = data.rfind(b"PK\x05\x06")
    struct.pack_into("<HH", data, end + 8, declared, declared)
    return bytes(data)


def test_an_end_record_that_lies_about_its_entries_is_refused_before_parsing(tmp_path, monkeypatch):
    data = lying_zip(3000, 3)
    parsed = []  # Python's zipfile is never asked to read it
    monkeypatch.setattr(upload.zipfile, "ZipFile", lambda *a, **k: parsed.append(1))
    t0 = time.perf_counter()
    with pytest.raises(CapsvizError, match="declares 3 entries, its directory holds 3,000"):
        receive_zip(data, tmp_path / "up")
    with pytest.raises(CapsvizError, match="at most 1,000"):
        receive_zip(data, tmp_path / "up", ZipLimits(files=1000))
    assert time.perf_counter() - t0 < 0.5 and not parsed and not (tmp_path / "up").exists()


def test_a_refused_zip_is_not_parsed_again_on_the_next_rerun(tmp_path, monkeypatch):
    data = make_zip({"a/x.png": b"text", "b/y.png": b"<html>"})
    with pytest.raises(CapsvizError, match="no readable PNG") as first:
        receive_zip(data, tmp_path / "up")
    monkeypatch.setattr(upload, "_unpack", lambda *a: pytest.fail("parsed again"))
    monkeypatch.setattr(upload, "check_directory", lambda *a: pytest.fail("checked again"))
    with pytest.raises(CapsvizError) as again:
        receive_zip(data, tmp_path / "up")
    assert str(again.value) == str(first.value)


def test_quotas_per_student_and_per_server_remove_the_oldest_first(tmp_path):
    up = tmp_path / "up"
    zips = [shapes_zip(per_class=30, size=32, seed=k) for k in range(5)]
    one = receive_zip(zips[0], tmp_path / "probe")
    stored_size = int((Path(one.spec.removeprefix("folder:")) / ".bytes").read_text())
    limits = ZipLimits(student_bytes=2 * stored_size + 100, server_bytes=3 * stored_size + 100, others_idle_s=0)
    a0 = receive_zip(zips[0], up, limits, filename="first.zip", owner="ann")
    receive_zip(zips[1], up, limits, filename="second.zip", owner="ann")
    a2 = receive_zip(zips[2], up, limits, filename="third.zip", owner="ann")
    assert a2.notes[-1] == f"your older upload first was removed to keep your uploads within {upload.mib(limits.student_bytes)}"
    assert not Path(a0.spec.removeprefix("folder:")).exists()
    with pytest.raises(CapsvizError, match="the upload first is no longer on this server"):  # a model trained on it says so
        user.load_user(a0.spec)
    b = receive_zip(zips[1], up, limits, owner="bob")  # ann's second, shared: one copy, counted for both
    c = receive_zip(zips[3], up, limits, owner="cat")
    assert not [n for n in b.notes + c.notes if "removed" in n]
    folders = sorted(p.name for p in up.iterdir() if is_digest(p.name))
    assert len(folders) == 3  # second (ann and bob), third (ann), fourth (cat): the server's 3 are full
    receive_zip(zips[4], up, limits, owner="dan")  # the least recently used goes: ann's third (bob used the second since)
    assert not Path(a2.spec.removeprefix("folder:")).exists() and Path(b.spec.removeprefix("folder:")).exists()
    assert stored(up) < limits.server_bytes + 50_000  # the zips' folders, names, owners and locks
    with pytest.raises(QuotaError, match="one student's uploads may take"):
        receive_zip(shapes_zip(per_class=100, size=32, seed=9), up, ZipLimits(student_bytes=stored_size), owner="eve")
    assert "eve" not in "".join(p.read_text() for p in (up / STATE_DIR).glob("*.owners"))  # only digests are stored
    assert not list(up.glob(f"{PART}*"))


def test_an_upload_error_names_the_upload_not_a_server_path(tmp_path):
    with pytest.raises(CapsvizError) as e:
        receive_zip(make_zip({"a/1.png": png(1), "a/2.png": png(2), "b/notes.txt": b"hi"}), tmp_path / "up", filename="mine.zip")
    assert str(tmp_path) not in str(e.value) and "mine" in str(e.value), e.value
    path = tmp_path / "up" / ("0123456789abcdef")
    assert hide_paths(f"folder:{path}: found 1 class; see {path}/a/1.png") == "upload 01234567: found 1 class; see upload 01234567"


# -- many students at once, and crashes ------------------------------------------------------------


def test_the_same_zip_from_many_students_at_once_gives_each_the_whole_dataset(tmp_path):
    data = make_zip({f"set/{c}/{i}.png": png(10 * k + i % 7, 16) for k, c in enumerate("abcd") for i in range(60)})
    start, results, errors = threading.Barrier(8), [], []

    def student(k):
        start.wait()
        try:
            results.append(receive_zip(data, tmp_path / "up", owner=f"s{k}"))
        except Exception as e:  # noqa: BLE001 - every failure is reported
            errors.append(repr(e))

    threads = [threading.Thread(target=student, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 8
    for s in results:
        assert s.classes == tuple("abcd") and sum(s.train_counts.values()) + sum(s.test_counts.values()) == 240
    assert len({s.spec for s in results}) == 1 and len(list(Path(results[0].spec.removeprefix("folder:")).glob("*/*.png"))) == 240
    assert not list((tmp_path / "up").glob(f"{PART}*"))
    owners = next((tmp_path / "up" / STATE_DIR).glob("*.owners")).read_text().split()
    assert len(owners) == 8


def test_an_unpack_cut_short_is_never_complete_and_its_leftovers_go(tmp_path, monkeypatch):
    data = shapes_zip()
    real, calls = upload.compact_picture, []

    def dies(*a):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt  # as a killed thread would stop
        return real(*a)

    monkeypatch.setattr(upload, "compact_picture", dies)
    with pytest.raises(KeyboardInterrupt):
        receive_zip(data, tmp_path / "up")
    assert not [p for p in (tmp_path / "up").iterdir() if not p.name.startswith(".")]
    # what a process killed mid-unpack leaves: its private folder, and a folder an older capsviz left without .complete
    digest = upload.hashlib.sha256(data).hexdigest()[:16]
    (tmp_path / "up" / f"{PART}{digest}-crash" / "a").mkdir(parents=True)
    (tmp_path / "up" / f"{PART}0123456789abcdef-crash").mkdir()
    (tmp_path / "up" / digest / "a").mkdir(parents=True)
    (tmp_path / "up" / digest / "a" / "1.png").write_bytes(png(1))
    monkeypatch.setattr(upload, "compact_picture", real)
    s = receive_zip(data, tmp_path / "up")
    assert sum(s.train_counts.values()) + sum(s.test_counts.values()) == 18
    assert not list((tmp_path / "up").glob(f"{PART}*"))


# -- decoded datasets in memory ---------------------------------------------------------------------


def test_decoded_datasets_kept_in_memory_stay_within_the_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSVIZ_DATASET_CACHE_MB", "1")
    monkeypatch.setattr(user, "_CACHE", user.OrderedDict())
    for k in range(4):
        x = np.full((500, 24, 24), k, np.uint8)  # 288 KB each
        np.savez(tmp_path / f"{k}.npz", images=x, labels=np.arange(500) % 2)
        user.load_user(f"npz:{tmp_path / f'{k}.npz'}")
    assert sum(user.nbytes(d) for d in user._CACHE.values()) <= MiB and len(user._CACHE) == 3
    np.savez(tmp_path / "big.npz", images=np.zeros((3000, 24, 24), np.uint8), labels=np.arange(3000) % 2)
    user.load_user(f"npz:{tmp_path / 'big.npz'}")  # 1.7 MB: read, not kept
    assert all("big" not in key[1] for key in user._CACHE)


# -- pictures too small for a model ------------------------------------------------------------------


def test_pictures_smaller_than_the_kernels_are_refused_with_the_size_that_works():
    assert size_refusal("capsnet-small", 8) == (
        "8x8 pictures are smaller than capsnet-small's kernels take (at least 17x17); choose Make images 28 (--resize 28) or another model"
    )
    assert size_refusal("capsnet-small", 17) is None and size_refusal("cnn-small", 8) is None
    assert "at least 11x11" in size_refusal("efficient-capsnet", 10, channels=3, classes=4)


# -- the command line's odd files --------------------------------------------------------------------


def train(tmp_path, dataset: str, *more: str) -> list[str]:
    return ["train", "--model", "capsnet-small", "--dataset", dataset, "--epochs", "1", "--out", str(tmp_path / "m.safetensors"), *more]


def one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def test_twelve_pixel_npz_images_give_one_line(tmp_path, capsys):
    np.savez(tmp_path / "s.npz", images=np.zeros((60, 12, 12), np.uint8), labels=np.arange(60) % 3)
    err = one_line_error(capsys, train(tmp_path, f"npz:{tmp_path / 's.npz'}"))
    assert "12x12 pictures are smaller than capsnet-small's kernels" in err and "--resize 28" in err
    assert not (tmp_path / "m.safetensors").exists()


def test_a_uint64_label_of_2_64_minus_1_is_refused(tmp_path, capsys):
    labels = np.arange(60, dtype=np.uint64) % 3
    labels[7] = 2**64 - 1
    np.savez(tmp_path / "s.npz", images=np.zeros((60, 28, 28), np.uint8), labels=labels)
    err = one_line_error(capsys, train(tmp_path, f"npz:{tmp_path / 's.npz'}"))
    assert "18,446,744,073,709,551,615" in err


def test_an_npy_header_declaring_petabytes_is_refused_before_reading(tmp_path, capsys):
    header = {"descr": "|u1", "fortran_order": False, "shape": (10**9, 1000, 1000)}
    b = io.BytesIO()
    np.lib.format.write_array_header_1_0(b, header)
    with zipfile.ZipFile(tmp_path / "s.npz", "w") as z:
        z.writestr("images.npy", b.getvalue() + b"\0" * 100)
        z.writestr("labels.npy", b"")
    err = one_line_error(capsys, train(tmp_path, f"npz:{tmp_path / 's.npz'}"))
    assert "declares shape (1000000000, 1000, 1000)" in err


def test_a_300_character_class_name_is_refused_before_training(tmp_path, capsys):
    names = np.array(["cat", "x" * 300, "dog"])
    np.savez(tmp_path / "s.npz", images=np.zeros((60, 28, 28), np.uint8), labels=np.arange(60) % 3, class_names=names)
    err = one_line_error(capsys, train(tmp_path, f"npz:{tmp_path / 's.npz'}"))
    assert "class name of 300 characters" in err and not (tmp_path / "m.safetensors").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are a Unix thing")
def test_a_fifo_named_like_data_never_hangs(tmp_path, capsys):
    cifar = tmp_path / "cifar"
    cifar.mkdir()
    os.mkfifo(cifar / "data_batch_1.bin")
    (cifar / "test_batch.bin").write_bytes(bytes(3073))
    t0 = time.perf_counter()
    err = one_line_error(capsys, train(tmp_path, f"cifar10:{cifar}"))
    assert "data_batch_1.bin is not a regular file" in err
    folder = tmp_path / "pics"
    for c in "ab":
        (folder / c).mkdir(parents=True)
        for i in range(3):
            Image.new("L", (28, 28), i).save(folder / c / f"{i}.png")
    os.mkfifo(folder / "a" / "x.png")
    data = user.load_user(f"folder:{folder}")
    assert data.skipped == {"not a regular file": 1} and time.perf_counter() - t0 < 30


def test_streamlits_upload_limit_is_the_zips():
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] * MiB == ZipLimits().compressed


def test_a_removed_upload_is_named_not_shown_by_its_path(tmp_path):
    s = receive_zip(shapes_zip(), tmp_path / "up", filename="shapes.zip")
    folder = Path(s.spec.removeprefix("folder:"))
    upload.shutil.rmtree(folder)
    with pytest.raises(CapsvizError) as e:
        user.load_user(s.spec)
    assert str(e.value).startswith("the upload shapes is no longer on this server") and str(tmp_path) not in str(e.value)
