"""A hostile student against the class server (issue 54, item 4): identities they cannot make up,
many identities from one machine, teacher-key guesses, class names that hide or reorder text,
one training run at a time across replicas, and what a response tells a browser."""

import threading
import time
import zipfile
from io import BytesIO

import numpy as np
import pytest

from capsviz import access, cli, jobs, serve, store
from capsviz.data import upload, user
from capsviz.errors import CapsvizError
from capsviz.train import TrainRun

QUICK = dict(model="cnn-small", batch_size=8, train_limit=32, test_limit=16, device="cpu", epochs=1)
LONG = dict(QUICK, train_limit=600, epochs=50)


def wait_until(predicate, timeout=60.0):
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


# -- identities ------------------------------------------------------------------------------


def test_a_made_up_or_changed_cookie_is_no_identity(tmp_path, monkeypatch, class_db):
    monkeypatch.delenv("CAPSVIZ_SECRET", raising=False)
    who, cookie = access.mint(tmp_path, "10.0.0.7")
    assert access.identity(tmp_path, {access.ID_COOKIE: cookie}) == who
    mac = cookie.split(".")[1]
    made_up = [
        "0123456789abcdef." + "0" * 32,  # the right shape, no signature
        "0123456789abcdef." + mac,  # another id under a real signature
        who + "." + mac[:-1] + ("0" if mac[-1] != "0" else "1"),  # one digit changed
        cookie + "0",
        cookie.upper(),
        "abc123",
        "",
        who,
    ]
    for value in made_up:
        assert access.identity(tmp_path, {access.ID_COOKIE: value}) is None, value
    assert access.identity(tmp_path, {access.ID_COOKIE: ["list"]}) is None
    assert (tmp_path / access.SECRET_FILE).stat().st_mode & 0o077 == 0  # the server's user alone reads the secret
    other = tmp_path / "another-server"
    other.mkdir()
    assert access.identity(other, {access.ID_COOKIE: cookie}) is None  # signed by another server's secret


def test_cookie_less_sessions_from_one_address_become_one_student_beyond_the_limit(tmp_path, monkeypatch, class_db):
    monkeypatch.setattr(access, "IDENTITIES_PER_ADDRESS", 5)
    made = [access.mint(tmp_path, "203.0.113.9") for _ in range(12)]
    fresh = [who for who, cookie in made if cookie]
    shared = {who for who, cookie in made if cookie is None}
    assert len(fresh) == 5 and len(set(fresh)) == 5
    assert shared == {access.crowd("203.0.113.9")}  # the rest count as one student, with no cookie to keep
    assert access.mint(tmp_path, "198.51.100.4")[1] is not None  # another address is not held back
    assert access.mint(tmp_path, access.LOCAL)[1] is not None  # nor the server's own machine
    later = time.time() + access.IDENTITY_WINDOW_S + 1
    assert store.store(tmp_path).mint("feedfeedfeedfeed", "203.0.113.9", access.IDENTITY_WINDOW_S, 5, now=later)


def test_the_limit_is_shared_by_every_app_process(tmp_path, monkeypatch, class_db):
    """Two replicas, each with its own connection to the store: the limit holds in all."""
    monkeypatch.setattr(access, "IDENTITIES_PER_ADDRESS", 10)
    stores = [store.Store(tmp_path), store.Store(tmp_path)]
    got = []

    def mint(s):
        for _ in range(10):
            got.append(s.mint(access.secrets.token_hex(8), "203.0.113.9", 600, 10))

    threads = [threading.Thread(target=mint, args=(s,)) for s in stores]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert got.count(True) == 10 and got.count(False) == 10


def test_replicas_opening_a_new_store_at_once_all_get_in(tmp_path):
    """Switching a new SQLite file to WAL does not wait for a lock: app processes starting together
    once saw "database is locked" (1 trial in 20 with 4 at once before the store tried again)."""
    for trial in range(40):
        folder = tmp_path / str(trial)
        failed = []

        def open_and_mint(folder, failed):
            try:
                store.Store(folder).mint(access.secrets.token_hex(8), "203.0.113.9", 600, 100)
            except Exception as e:  # any failure of any replica is the finding
                failed.append(repr(e))

        threads = [threading.Thread(target=open_and_mint, args=(folder, failed)) for _ in range(6)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert not failed, (trial, failed)
        assert store.Store(folder)._read("SELECT COUNT(*) FROM identities") == [(6,)]


@pytest.mark.parametrize(
    "peer, forwarded, address",
    [
        (None, [], access.LOCAL),
        ("10.0.0.7", [], "10.0.0.7"),
        ("10.0.0.7", ["127.0.0.1"], "10.0.0.7"),  # a remote browser claiming to be local
        (None, ["127.0.0.1, 10.0.0.7"], "10.0.0.7"),  # a forged first value, nginx's own last
        (None, ["127.0.0.1"], access.LOCAL),
    ],
)
def test_a_browsers_address_is_the_one_nginx_saw(peer, forwarded, address):
    assert access.client_address(peer, forwarded) == address


# -- the teacher key --------------------------------------------------------------------------


def test_a_short_teacher_key_stops_the_server_before_it_starts(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("CAPSVIZ_TEACHER_KEY", "42")
    with pytest.raises(CapsvizError, match="has 2 characters; a teacher key needs at least 12"):
        access.teacher_key(tmp_path)
    monkeypatch.setattr(serve.shutil, "which", lambda *a, **k: pytest.fail("nothing else is started"))
    assert cli.main(["app", "--replicas", "2"]) == 2
    assert "a teacher key needs at least 12" in capsys.readouterr().err
    monkeypatch.setenv("CAPSVIZ_TEACHER_KEY", "a-long-enough-key")
    assert access.teacher_key(tmp_path) == "a-long-enough-key"


def test_teacher_key_guesses_are_limited_per_address_and_in_all(tmp_path, monkeypatch, class_db):
    monkeypatch.setenv("CAPSVIZ_TEACHER_KEY", "the-real-key-123")
    for k in range(access.GUESSES_PER_ADDRESS):
        assert access.try_key(tmp_path, f"guess-{k}", "10.0.0.7") == "wrong"
    assert access.try_key(tmp_path, "the-real-key-123", "10.0.0.7") == "wait"  # not even the right key, now
    assert access.try_key(tmp_path, "the-real-key-123", "10.0.0.8") == "teacher"  # another address may
    monkeypatch.setattr(access, "GUESSES_IN_ALL", 8)
    for k in range(3):
        assert access.try_key(tmp_path, "nope", f"10.0.1.{k}") == "wrong"
    assert access.try_key(tmp_path, "the-real-key-123", "10.0.0.9") == "wait"  # a botnet's guesses stop everyone's
    later = time.time() + access.GUESS_WINDOW_S + 1
    assert store.store(tmp_path).guesses("10.0.0.7", access.GUESS_WINDOW_S, now=later) == (0, 0)


def test_the_key_is_never_offered_as_a_link(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CAPSVIZ_TEACHER_KEY", "the-real-key-123")
    monkeypatch.setattr(access, "_printed", False)
    access.announce(tmp_path)
    line = capsys.readouterr().err
    assert "the-real-key-123" in line and "?teacher=" not in line and "Class panel" in line


# -- class names and folders ------------------------------------------------------------------


def test_class_names_lose_bidirectional_and_zero_width_characters_from_any_source(tmp_path):
    names = ["\u202ecat", "do\u200bg", "\u2066bird\u2069", "fi\u200dsh"]
    x = np.random.default_rng(0).integers(0, 255, (40, 28, 28), dtype=np.uint8)
    np.savez(tmp_path / "n.npz", images=x, labels=np.arange(40) % 4, class_names=np.array(names))
    data = user.load_user(f"npz:{tmp_path / 'n.npz'}")
    assert data.classes == ("cat", "dog", "bird", "fish")
    np.savez(tmp_path / "twice.npz", images=x, labels=np.arange(40) % 2, class_names=np.array(["a", "a\u200b"]))
    with pytest.raises(CapsvizError, match="two classes are both named 'a'"):
        user.load_user(f"npz:{tmp_path / 'twice.npz'}")
    np.savez(tmp_path / "empty.npz", images=x, labels=np.arange(40) % 2, class_names=np.array(["a", "\u200b\u202e"]))
    with pytest.raises(CapsvizError, match="empty once its invisible characters"):
        user.load_user(f"npz:{tmp_path / 'empty.npz'}")


def png(seed: int, size: int = 16) -> bytes:
    from PIL import Image

    out = BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (size, size), dtype=np.uint8)).save(out, "PNG")
    return out.getvalue()


def test_folder_class_names_are_cleaned_and_a_skipped_class_folder_is_counted(tmp_path):
    root = tmp_path / "set"
    for c, name in enumerate(["\u202eleft", "ri\u200bght", ".hidden"]):
        (root / name).mkdir(parents=True)
        for i in range(6):
            (root / name / f"{i}.png").write_bytes(png(10 * c + i))
    data = user.load_user(f"folder:{root}")
    assert sorted(data.classes) == ["left", "right"]
    assert data.skipped.get("hidden class folder (a name starting with a dot)") == 1
    assert any("1 hidden class folder" in n for n in data.notes), data.notes


def test_an_uploaded_zips_class_names_are_cleaned(tmp_path):
    buf = BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for c, name in enumerate(["\u202eup", "do\u200bwn"]):
            for i in range(6):
                z.writestr(f"{name}/{i}.png", png(10 * c + i))
    got = upload.receive_zip(buf.getvalue(), tmp_path / "up", owner="ann")
    assert set(got.classes) == {"up", "down"}


# -- what a response says ---------------------------------------------------------------------


def test_no_response_tells_a_browser_the_replicas_ports(tmp_path):
    import re

    config = serve.nginx_config(tmp_path, "8501", [9001, 9002])
    assert "X-Capsviz-Replica" not in config and "upstream_addr" not in "".join(re.findall(r"add_header.*", config))
    assert re.findall(r'"(capsviz_replica=[^;"]*)', config) == ["capsviz_replica=r0", "capsviz_replica=r1"]  # names, not ports
    assert "upstream_addr" in serve.nginx_config(tmp_path, "8501", [9001], replica_header=True)  # the load tests' own


# -- the training queue -----------------------------------------------------------------------


def test_many_identities_from_one_address_do_not_fill_the_queue(synthetic_data, tmp_path, monkeypatch, class_db):
    monkeypatch.setattr(jobs, "MAX_WAITING", 10)
    monkeypatch.setattr(jobs, "MAX_WAITING_PER_ADDRESS", 5)
    q = jobs.TrainQueue()
    first = q.submit(TrainRun(**LONG), tmp_path / "first.safetensors", "someone", address="198.51.100.4")
    taken, refused = [], []
    for k in range(12):  # one script, twelve identities
        try:
            taken.append(q.submit(TrainRun(**QUICK), tmp_path / f"h{k}.safetensors", f"hostile-{k}", address="203.0.113.9"))
        except CapsvizError as e:
            refused.append(str(e))
    assert len(taken) == 5 and len(refused) == 7 and "from your network" in refused[0]
    others = [q.submit(TrainRun(**QUICK), tmp_path / f"s{k}.safetensors", f"student-{k}", address=f"198.51.100.{10 + k}") for k in range(5)]
    assert [q.position(j) for j in others] == [6, 7, 8, 9, 10]  # the rest of the class still queues
    for j in [*taken, *others]:
        q.cancel(j, j.owner)
    q.cancel(first, "someone")
    jobs.wait(first, 60)


def test_two_replicas_pressing_start_at_once_get_one_run_and_one_queued(synthetic_data, tmp_path, class_db):
    replicas = [jobs.TrainQueue(), jobs.TrainQueue()]  # two app processes of one server: one model folder
    barrier, got = threading.Barrier(2), {}

    def press(k):
        barrier.wait()
        got[k] = replicas[k].submit(TrainRun(**LONG), tmp_path / f"m{k}.safetensors", f"student-{k}", address=f"10.0.0.{k}")

    threads = [threading.Thread(target=press, args=(k,)) for k in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    a, b = got[0], got[1]
    wait_until(lambda: max(a.snapshot().step, b.snapshot().step) >= 3)
    time.sleep(1.0)
    shots = [a.snapshot(), b.snapshot()]
    training = [s for s in shots if s.step > 0]
    waiting = [s for s in shots if s.step == 0]
    assert len(training) == 1 and len(waiting) == 1
    assert waiting[0].state == "queued" and waiting[0].position == 1, waiting[0]
    assert jobs.progress_line(waiting[0]).endswith("queued, position 1")
    first, second = (a, b) if training[0].out == a.out else (b, a)
    runs = store.store(tmp_path).runs()
    assert [r.state for r in runs] == ["running", "queued"] and runs[0].owner == first.owner

    store.store(tmp_path).stop_run(first.rid)  # the teacher, from whichever replica: the run stops
    assert jobs.wait(first, 60).state == "stopped"
    wait_until(lambda: second.snapshot().step > 0)  # and the queued one trains next
    store.store(tmp_path).stop_run(second.rid)
    assert jobs.wait(second, 60).state == "stopped"
    assert store.store(tmp_path).runs() == []


def test_the_teacher_removes_a_waiting_run_on_another_replica(synthetic_data, tmp_path, class_db):
    q = jobs.TrainQueue()
    running = q.submit(TrainRun(**LONG), tmp_path / "a.safetensors", "a", address="10.0.0.1")
    waiting = q.submit(TrainRun(**QUICK), tmp_path / "b.safetensors", "b", address="10.0.0.2")
    store.store(tmp_path).stop_run(waiting.rid)
    wait_until(lambda: waiting.state == "cancelled", 10)
    assert waiting.snapshot().message == "removed by the teacher" and not (tmp_path / "b.safetensors").exists()
    q.cancel(running, "a")
    jobs.wait(running, 60)


# -- uploads ----------------------------------------------------------------------------------


def shapes(seed: int) -> bytes:
    buf = BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for c in "ab":
            for i in range(20):
                z.writestr(f"{c}/{i}.png", png(seed * 100 + ord(c) + i, 24))
    return buf.getvalue()


def test_many_identities_cannot_push_a_classmates_upload_out(tmp_path, class_db):
    up = tmp_path / "up"
    probe = upload.receive_zip(shapes(0), tmp_path / "probe")
    size = int((user.Path(probe.spec.removeprefix("folder:")) / ".bytes").read_text())
    limits = upload.ZipLimits(student_bytes=2 * size, server_bytes=3 * size + size // 2)
    ann = upload.receive_zip(shapes(1), up, limits, owner="ann")
    refused = 0
    for k in range(6):  # six made identities, each with its own zip
        try:
            upload.receive_zip(shapes(10 + k), up, limits, owner=f"hostile-{k}")
        except upload.QuotaError as e:
            refused += 1
            assert "ask the teacher" in str(e)
    assert refused >= 4 and user.Path(ann.spec.removeprefix("folder:")).exists()  # ann's stays for the lesson
    listed = upload.stored_uploads(up)
    assert sum(u.bytes for u in listed) <= limits.server_bytes and len(listed) == 3
    assert upload.remove_upload(up, listed[0].digest) and len(upload.stored_uploads(up)) == 2  # the teacher makes room
    assert not upload.remove_upload(up, "../etc")


def test_a_checkpoints_recorded_class_names_lose_bidirectional_and_zero_width_characters(tmp_path):
    from capsviz import checkpoint as ckpt
    from capsviz.config import preset
    from capsviz.models import build_model

    model = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4))
    about = {"dataset": "mnist", "classes": [f"\u202e{k}\u200b" for k in range(10)]}
    ckpt.save_checkpoint(tmp_path / "m.safetensors", model, about)
    assert ckpt.read_meta(tmp_path / "m.safetensors").class_names == tuple(str(k) for k in range(10))


def test_the_key_entered_on_one_replica_makes_the_teacher_on_every_replica_and_after_a_restart(tmp_path, monkeypatch, class_db):
    monkeypatch.setenv("CAPSVIZ_TEACHER_KEY", "the-real-key-123")
    who, other = (access.mint(tmp_path, "10.0.0.7")[0] for _ in range(2))
    assert not access.keyed(tmp_path, who)
    assert access.try_key(tmp_path, "the-real-key-123", "10.0.0.7") == "teacher"
    access.key_entered(tmp_path, who)
    assert access.keyed(tmp_path, who)
    monkeypatch.setattr(access, "_keyed", set())  # another app process, or this one started again
    monkeypatch.setattr(access, "_not_keyed", {})
    assert access.keyed(tmp_path, who) and not access.keyed(tmp_path, other)
    store.store(tmp_path).keyed(other)  # the key entered on another process: counted once the answer kept here is old
    assert not access.keyed(tmp_path, other)
    monkeypatch.setattr(access, "KEYED_CHECK_S", 0.0)
    assert access.keyed(tmp_path, other)


def test_a_shared_identity_never_holds_the_teacher_key(tmp_path):
    """Every browser behind an address's shared identity would be the teacher: the key is refused there."""
    who = access.crowd("203.0.113.7")
    assert access.shared(who) and not access.shared("s-0123456789")
    with pytest.raises(ValueError):
        access.key_entered(tmp_path, who)
    assert not access.keyed(tmp_path, who)
