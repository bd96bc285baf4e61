"""The questions the static site asks (capsviz.site.quiz): the app's own questions
(capsviz.analysis.questions) on the model's answer for each image, in every language, with the
verdict for every choice; needs no dataset (made-up images)."""

import numpy as np

from capsviz.analysis import predict
from capsviz.analysis.questions import both_digits, longest_capsule
from capsviz.checkpoint import load_checkpoint
from capsviz.i18n import LANGUAGES, speaking
from capsviz.paths import shipped_checkpoints
from capsviz.site import quiz


def images(n: int, size: int) -> np.ndarray:
    out = np.zeros((n, size, size), np.uint8)
    for k in range(n):
        out[k, 6 + 2 * k : 22 + 2 * k, 10 + 3 * k : 14 + 3 * k] = 255
    return out


def test_the_explorers_question_is_the_apps_for_each_image_and_language():
    path = shipped_checkpoints() / "capsnet-small-mnist.safetensors"
    model, meta = load_checkpoint(path)
    got = quiz.questions_for(model, meta, path, images(2, 28), [1, 7], n=2)
    assert set(got) == set(LANGUAGES) and all(len(v) == 2 for v in got.values())
    names = [str(c) for c in meta.class_names]
    image = images(2, 28)[1].astype(np.float32) / 255
    p = predict(model, image)
    for lang in LANGUAGES:
        with speaking(lang):
            want = longest_capsule(path.name, image, p.scores, p.predicted, names, "7")
            q = got[lang][1]
            assert (q["qid"], q["text"], q["keys"], q["answer"], q["why"]) == (
                want.qid,
                str(want.text),
                list(want.keys),
                want.answer,
                str(want.why),
            )
            assert q["labels"] == [str(x) for x in want.labels]
            assert q["verdicts"] == {k: want.verdict(k) for k in want.keys} | {"": want.verdict(None)}
    assert got["en"][1]["answer"] == str(int(np.argmax(p.scores)))  # the longest capsule, as the explorer's chart shows
    assert got["ja"][1]["text"] != got["en"][1]["text"] and got["ja"][1]["qid"] == got["en"][1]["qid"]


def test_a_multimnist_model_asks_how_many_of_the_two_digits_it_names():
    path = shipped_checkpoints() / "capsnet-small-multimnist.safetensors"
    model, meta = load_checkpoint(path)
    pair = images(1, 36)
    q = quiz.questions_for(model, meta, path, pair, [[1, 4]], n=1)["en"][0]
    image = pair[0].astype(np.float32) / 255
    top2 = tuple(int(j) for j in np.argsort(-predict(model, image).scores, kind="stable")[:2])
    want = both_digits(path.name, image, top2, (1, 4))
    assert q["answer"] == want.answer == str(len(set(top2) & {1, 4})) and q["why"] == str(want.why)
    assert sorted(q["keys"]) == ["0", "1", "2"]
