"""The MultiMNIST page's measured accuracy says on how many pairs it was measured (AppTest over
test_app's tiny checkpoints and synthetic data)."""

import test_app

from capsviz.analysis.multimnist import pair_accuracy
from capsviz.checkpoint import load_checkpoint
from capsviz.data import load_split

app = test_app.app
router_mode = test_app.router_mode


def test_measured_accuracy_says_how_many_pairs(app):
    app.run().sidebar.selectbox(key="model_pick").set_value("tiny-multimnist.safetensors").run()
    app.switch_page("pages/multimnist.py").run()
    app.select_slider(key="pairs_measured").set_value(100).run()
    app.button(key="run_Measure accuracy").click().run()
    assert not app.exception, app.exception
    data = load_split("multimnist", "test")
    res = pair_accuracy(load_checkpoint(app.folder / "tiny-multimnist.safetensors")[0], data.images, data.labels, 100)
    assert res.n == 100 and app.metric[0].value == f"{res.accuracy:.1f}%"
    assert res.words() in [c.value for c in app.caption] and res.words().startswith(f"{res.right} of 100 test pairs right (")
    assert app.metric[0].proto.help == res.words()
