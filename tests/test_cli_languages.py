"""The command line and the core's refusals in the reader's language: the command line's language
from the environment as gettext programs read it, or --lang; a refusal made in the core in the
language of the session or command that caused it; words kept for every session (a dataset's
notes, a refused upload, the model folder's listing) said in each reader's own."""

from __future__ import annotations

import argparse
import gettext
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest
from test_app import (
    APP,
    app,  # noqa: F401 - the fixture: an AppTest of app.py over the tiny models
    router_mode,  # noqa: F401 - an autouse fixture: st.navigation in charge, as served
)

from capsviz import cli, i18n, jobs
from capsviz.checkpoint import list_checkpoints
from capsviz.data.upload import ZipLimits, receive_zip, summarize
from capsviz.data.user import load_user, summary_line
from capsviz.errors import CapsvizError
from capsviz.i18n import speaking
from capsviz.train import TrainRun

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")
BROKEN = b"not a checkpoint"  # 16 bytes whose first 8 claim a header far longer than the file


def run_cli(*argv: str, **env: str) -> subprocess.CompletedProcess:
    """`python -m capsviz ...` with only the locale variables given set."""
    base = {k: v for k, v in os.environ.items() if k not in LOCALE}
    return subprocess.run(
        [sys.executable, "-m", "capsviz", *argv], capture_output=True, text=True, cwd=ROOT, env={**base, **env}, timeout=300
    )


@pytest.fixture
def english_environment(monkeypatch):
    for name in LOCALE:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "environ, want",
    [
        ({"LANG": "ja_JP.UTF-8"}, "ja"),
        ({"LANG": "zh_CN.UTF-8"}, "zh-Hans"),
        ({"LC_ALL": "zh_SG"}, "zh-Hans"),
        ({"LC_MESSAGES": "zh_Hans.UTF-8@stroke"}, "zh-Hans"),
        ({"LANGUAGE": "fr:ja", "LANG": "en_US.UTF-8"}, "ja"),  # LANGUAGE is a list: its first language capsviz speaks
        ({"LC_ALL": "C", "LANG": "ja_JP.UTF-8"}, "en"),  # the first variable that is set decides
        ({"LANGUAGE": "", "LANG": "ja_JP"}, "ja"),  # an empty one is not set
        ({"LANG": "C.UTF-8"}, "en"),
        ({"LANG": "fr_FR.UTF-8"}, "en"),
        ({}, "en"),
    ],
)
def test_the_command_lines_language_comes_from_the_environment_as_gettext_reads_it(environ, want):
    assert i18n.from_environment(environ) == want


@pytest.mark.parametrize(
    "argv, want",
    [
        (["--lang", "zh-Hans", "list"], "zh-Hans"),
        (["--lang=ja", "list"], "ja"),
        (["--lang", "zh_CN", "list"], "zh-Hans"),
        (["--lang", "fr", "list"], "ja"),  # not one capsviz speaks: the environment's (and the parser refuses it)
        (["list", "--lang", "zh-Hans"], "ja"),  # after the command it is not the top-level option
        (["list"], "ja"),
    ],
)
def test_lang_before_the_command_overrides_the_environment(argv, want):
    assert cli.command_language(argv, {"LANG": "ja_JP.UTF-8"}) == want


def test_help_in_japanese_from_lang_and_english_without(tmp_path):
    ja = run_cli("--help", LANG="ja_JP.UTF-8")
    assert ja.returncode == 0, ja.stderr
    assert ja.stdout.startswith("使い方: ") and "ルーティングの様子が見えるカプセルネットワーク。" in ja.stdout
    assert "このヘルプを表示して終了します" in ja.stdout and "usage:" not in ja.stdout and "options" not in ja.stdout
    en = run_cli("--help")
    assert en.stdout.startswith("usage: ") and "Capsule networks you can watch route." in en.stdout
    assert "show this help message and exit" in en.stdout


def test_help_of_a_command_in_chinese_fits_the_terminal(capsys, english_environment, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as done:
        cli.main(["--lang", "zh-Hans", "train", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert out.startswith("用法：") and "训练数据集：mnist" in out and "（默认：capsnet-small）" in out
    # argparse wraps at the terminal's width less 2 (80 columns here); a Chinese character takes two
    assert all(cli.columns(line) <= 78 for line in out.splitlines() if not line.lstrip().startswith(("[", "--model {", "用法")))
    assert argparse._ is gettext.gettext and i18n.language() == "en"  # the command's language ends with it


def test_a_corrupt_checkpoint_and_a_refusal_in_japanese_chinese_with_lang_and_english(tmp_path):
    (tmp_path / "broken.safetensors").write_bytes(BROKEN)
    ja = run_cli("list", str(tmp_path), LANG="ja_JP.UTF-8")
    assert ja.returncode == 0, ja.stderr
    assert ja.stdout.strip() == (
        f"broken.safetensors: 使えません: {tmp_path / 'broken.safetensors'}: 読める safetensors のチェックポイントではありません"
        "（ヘッダがファイルより多いバイト数を主張しています）"
    )
    missing = run_cli("list", str(tmp_path / "nope"), LANG="ja_JP.UTF-8")
    assert missing.returncode == 2 and missing.stderr.strip() == f"エラー: {tmp_path / 'nope'}: そのフォルダはありません"
    zh = run_cli("--lang", "zh-Hans", "list", str(tmp_path / "nope"), LANG="ja_JP.UTF-8")
    assert zh.returncode == 2 and zh.stderr.strip() == f"错误：{tmp_path / 'nope'}：没有这个文件夹"
    en = run_cli("list", str(tmp_path))
    assert en.stdout.strip() == (
        f"broken.safetensors: unusable: {tmp_path / 'broken.safetensors'}: not a readable safetensors checkpoint "
        "(its header claims more bytes than the file has)"
    )


def test_argparses_own_refusals_in_the_commands_language(capsys, english_environment):
    assert cli.main(["--lang", "ja", "evaluate"]) == 2
    assert capsys.readouterr().err.strip() == "エラー: python -m capsviz evaluate: 次の引数が必要です: path"
    assert cli.main(["--lang", "zh-Hans", "bench", "--steps", "0"]) == 2
    assert capsys.readouterr().err.strip() == "错误：python -m capsviz bench: 参数 --steps：必须是 [1, 10000] 范围内的整数，实际是 0"
    assert cli.main(["--lang", "fr", "list"]) == 2
    assert "capsviz speaks en, zh-Hans, ja, not 'fr'" in capsys.readouterr().err
    assert cli.main(["bench", "--steps", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: python -m capsviz bench: argument --steps: must be an integer in [1, 10000], found 0"
    )


def test_a_missing_dataset_is_refused_in_chinese(tmp_path, capsys, monkeypatch, english_environment):
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(tmp_path / "nothing"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--model", "cnn-small", "--out", str(tmp_path / "m.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("错误：未找到 mnist。查找了：\n") and "解决办法：运行 `python -m capsviz data --download`" in err


def test_a_corrupt_checkpoint_named_by_a_link_is_explained_in_the_sessions_language(app):  # noqa: F811
    (app.folder / "broken.safetensors").write_bytes(BROKEN)
    app.query_params["lang"] = "zh-Hans"
    app.query_params["model"] = "broken.safetensors"
    app.switch_page("pages/glossary.py").run()
    assert not app.exception
    said = " ".join(w.value for w in app.warning)
    assert "不是可读取的 safetensors 检查点（文件头声明的字节数比文件实际的还多）" in said, said

    other = AppTest.from_file(APP, default_timeout=60)  # another student, in English, the same folder
    other.query_params["model"] = "broken.safetensors"
    other.switch_page("pages/glossary.py").run()
    said = " ".join(w.value for w in other.warning)
    assert "not a readable safetensors checkpoint (its header claims more bytes than the file has)" in said, said


def test_the_model_folders_listing_is_kept_per_language(tmp_path):
    (tmp_path / "broken.safetensors").write_bytes(BROKEN)
    with speaking("ja"):
        assert "読める safetensors のチェックポイントではありません" in list_checkpoints(tmp_path)[0][1]
    assert "not a readable safetensors checkpoint" in list_checkpoints(tmp_path)[0][1]


def write_pictures(folder: Path, sizes=((20, 20), (24, 20))) -> None:
    """Two classes of three pictures each, of two sizes: a dataset whose reading says what it did."""
    for k, name in enumerate(("circle", "square")):
        (folder / name).mkdir(parents=True)
        for i in range(3):
            w, h = sizes[i % len(sizes)]
            Image.fromarray(np.full((h, w), 60 * (k + i), np.uint8)).save(folder / name / f"{i}.png")
        (folder / name / "notes.txt").write_text("not a picture")


def test_a_datasets_notes_are_read_once_and_said_in_each_readers_language(tmp_path):
    write_pictures(tmp_path / "shapes")
    data = load_user(f"folder:{tmp_path / 'shapes'}")  # read once, for every session
    english = summary_line(data)
    assert "no test folder: 2 of 6 images held out by a fixed split" in english and "skipped 2 not an image (PNG, JPEG, BMP)" in english
    with speaking("zh-Hans"):
        zh = summary_line(data)
        skipped = summarize(data).skipped
    assert "2 个类别（circle, square）" in zh and "没有 test 文件夹：按固定划分从 6 张图像中留出 2 张" in zh
    assert zh.endswith("；已跳过：不是图片（PNG、JPEG、BMP） 2 个") and skipped == {"不是图片（PNG、JPEG、BMP）": 2}
    with speaking("ja"):
        notes = summarize(data).notes
    assert any(n.startswith("2 種類の大きさの画像を 20x20 にしました") for n in notes), notes
    assert load_user(f"folder:{tmp_path / 'shapes'}") is data  # still read only once
    assert summarize(data).skipped == {"not an image (PNG, JPEG, BMP)": 2}


def test_a_refused_upload_is_refused_again_in_each_students_language(tmp_path):
    junk = b"PK\x03\x04 this is not really a zip"
    with pytest.raises(CapsvizError, match="not a zip file"):
        receive_zip(junk, tmp_path, ZipLimits())
    with speaking("ja"), pytest.raises(CapsvizError, match="zip ファイルではありません"):
        receive_zip(junk, tmp_path, ZipLimits())
    with speaking("zh-Hans"), pytest.raises(CapsvizError, match="不是 zip 文件"):
        receive_zip(junk, tmp_path, ZipLimits())


def test_a_training_thread_speaks_the_language_of_the_student_who_started_it(synthetic_data, tmp_path):
    q = jobs.TrainQueue()
    quick = TrainRun(model="cnn-small", batch_size=8, train_limit=32, test_limit=16, device="cpu", epochs=1)
    with speaking("ja"):  # resuming from a file that does not exist fails on the thread
        failed = q.submit(quick, tmp_path / "bad.safetensors", "a", resume=tmp_path / "missing.safetensors")
    done = jobs.wait(failed, 60)
    assert done.state == "failed" and "が見つかりません" in done.message, done.message
    with speaking("zh-Hans"):
        finished = jobs.wait(q.submit(quick, tmp_path / "good.safetensors", "b"), 120)
    assert finished.state == "finished" and finished.message == f"已保存 {tmp_path / 'good.safetensors'}"


def test_the_sites_models_named_in_the_help_are_the_sites():
    from capsviz import site

    assert cli.SITE_MODELS == site.DEFAULT_MODELS


def test_chinese_and_japanese_lines_wrap_by_their_width_and_keep_punctuation_with_its_word():
    text = "训练一个模型，每个轮次（epoch）保存一次检查点；已在该处的模型会保留到本次训练结束"
    lines = cli.wrap(text, 20)
    assert "".join(lines) == text and all(cli.columns(line) <= 20 for line in lines)
    assert not any(line[0] in cli.CLOSING or line[-1] in cli.OPENING for line in lines)
    assert cli.wrap("hello world this is a test", 10) == ["hello", "world this", "is a test"]


def test_said_returns_other_text_as_it_is():
    assert i18n.said("plain") == "plain"
    s = i18n.sentence_n("{n} file of {name}", "{n} files of {name}", 2, name="x")
    assert s == "2 files of x" and isinstance(s, str) and i18n.said(s) == "2 files of x"
    with io.StringIO() as f:  # a Sentence is a str wherever one goes
        f.write(s)
        assert f.getvalue() == "2 files of x"


def test_doctor_says_every_fast_path_in_the_terminals_language(monkeypatch):
    """`capsviz doctor`'s kernel lines (capsviz.kernels.policy) and the native kernel's reasons,
    in Japanese and Chinese as in English, with the same paths."""
    from capsviz.i18n import speaking
    from capsviz.kernels import native, policy

    monkeypatch.setenv(native.NATIVE_ENV, "0")
    english = policy.paths("cpu")
    for lang in ("ja", "zh-Hans"):
        with speaking(lang):
            said = policy.paths("cpu")
            off = native.switched_off()
        assert [p.path for p in said] == [p.path for p in english]
        assert all(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", p.reason) for p in said if p.reason)
        assert native.NATIVE_ENV in off and re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", off)


def test_an_imports_notes_are_said_in_each_readers_language(synthetic_data, tmp_path, monkeypatch):
    """An import run in English keeps its notes as messages and their values, so the zoo card and
    `capsviz list` say them in Chinese and Japanese; an older import's notes, kept as plain text, are
    shown as they are."""
    import torch
    from capsule_conventions import make
    from test_plain_text import as_shown

    from capsviz import checkpoint as ckpt
    from capsviz.adapter import import_file
    from capsviz.against import STAGE_WORDS
    from capsviz.i18n import t

    folder = tmp_path / "models"
    torch.save(make("paper").state_dict(), tmp_path / "paper.pt")
    with speaking("en"):
        import_file(
            tmp_path / "paper.pt",
            folder / "mine.safetensors",
            evaluate=False,
            against=f"{ROOT / 'tests' / 'capsule_conventions.py'}:make",
            normalise=(0.0, 1.0),
        )
    model, meta = ckpt.load_checkpoint(folder / "mine.safetensors")
    stored = meta.raw["imported"]["notes"]
    assert all(isinstance(n, dict) for n in stored), stored  # message and values, in no language
    old = "W read from caps.W as (I, J*D, K)"  # an older import's note, in the words it was made in
    ckpt.save_checkpoint(folder / "old.safetensors", model, {**meta.raw, "imported": {**meta.raw["imported"], "notes": [old]}})
    checked = meta.raw["imported"]["checked"]

    def wanted(lang: str) -> list[str]:
        with speaking(lang):
            return [
                t("assumed: Conv1 stride 1 and ReLU, PrimaryCaps stride 2, no padding"),
                t(
                    "checked against your code: max difference {difference} on {B} images ({matched})",
                    difference=f"{checked['max_difference']:.2g}",
                    B=checked["images"],
                    matched=", ".join(t(STAGE_WORDS[k]) for k in checked["stages"]),
                ),
                t("the check fed your network {images}", images=t("{images} (--normalise)", images=t("[0, 1] pixels"))),
            ]

    english = wanted("en")
    for lang, env in (("zh-Hans", "zh_CN.UTF-8"), ("ja", "ja_JP.UTF-8")):
        words = wanted(lang)
        assert not set(words) & set(english)
        listed = run_cli("list", str(folder), LANG=env)
        assert listed.returncode == 0, listed.stderr
        notes = [line.strip() for line in listed.stdout.splitlines() if line.startswith("  ")]
        assert all(w in notes for w in words), (words, notes)
        assert old in notes and not set(english) & set(notes)

        monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(folder))
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params["lang"] = lang
        at.switch_page("pages/zoo.py").run()
        assert not at.exception, at.exception
        with speaking(lang):
            assert [e.label for e in at.main.expander].count(t("What the import noted")) == 2
        shown = [as_shown(line)[2:] for m in at.markdown for line in m.value.splitlines() if line.startswith("- ")]
        assert all(w in shown for w in words) and old in shown and not set(english) & set(shown), shown


def test_an_imported_models_machine_is_said_in_the_readers_language():
    """An import keeps where a model was trained as a sentence; each reader reads it in theirs."""
    from capsviz.checkpoint import total_training
    from capsviz.i18n import speaking

    meta = {"epochs": 1, "hardware": "trained outside capsviz (imported from mine.pt)", "imported": {"file": "mine.pt"}}
    for lang, word in (("en", "trained outside capsviz"), ("zh-Hans", "之外训练"), ("ja", "の外で学習")):
        with speaking(lang):
            (said,) = total_training(meta)["hardware"]
        assert word in said and "mine.pt" in said, (lang, said)
