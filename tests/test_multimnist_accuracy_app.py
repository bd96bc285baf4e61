"""The MultiMNIST page's measured pair error says on how many pairs it was measured, and sets it against
the pair error stored with the model, within chance or beyond (AppTest over test_app's tiny
checkpoints and synthetic data)."""

import test_app

from capsviz import glossary
from capsviz.analysis.multimnist import pair_accuracy, stored_pair_error, stored_words
from capsviz.checkpoint import load_checkpoint, read_meta
from capsviz.data import load_split

app = test_app.app
router_mode = test_app.router_mode


def test_measured_pair_error_says_how_many_pairs_and_sets_it_against_the_stored_one(app):
    app.run().sidebar.selectbox(key="model_pick").set_value("tiny-multimnist.safetensors").run()
    app.switch_page("pages/multimnist.py").run()
    app.select_slider(key="pairs_measured").set_value(100).run()
    app.button(key="run_Measure accuracy").click().run()
    assert not app.exception, app.exception
    data = load_split("multimnist", "test")
    path = app.folder / "tiny-multimnist.safetensors"
    res = pair_accuracy(load_checkpoint(path)[0], data.images, data.labels, 100)
    assert res.n == 100 and app.metric[0].label == "Pair error" and app.metric[0].value == f"{100 - res.accuracy:.2f}%"
    assert app.metric[0].proto.help.endswith(glossary.TERMS["pair_error"].explanation)  # the zoo's name, the glossary's words
    captions = [c.value for c in app.caption]
    assert res.words() in captions and res.words().startswith(f"{res.right} of 100 test pairs right (")
    assert f"pair error {100 - res.accuracy:.2f}%" in res.words() and "test error" not in res.words()
    stored = stored_pair_error(read_meta(path))
    assert stored == (50.0, 100)  # the fixture's record
    assert stored_words(res, stored) in captions and "against the 50.00% stored with this model on 100 pairs" in stored_words(res, stored)
