"""The numbers the pages draw are the ones the core recorded."""

import numpy as np
import torch

from capsviz.analysis import STEPS, decode, dimension_effect, perturbation_grid, predict
from capsviz.analysis.routing import coupling_summary, dynamic_trace, em_trace, iteration_sweep, mean_b_change, vote_histograms
from capsviz.config import preset
from capsviz.models import build_model

IMAGE = np.random.default_rng(0).random((28, 28)).astype(np.float32)


def test_dynamic_trace_matches_the_model(capsnet):
    tr = dynamic_trace(capsnet, IMAGE, 3)
    assert tr.c.shape == (3, 6 * 6 * 4, 10)
    np.testing.assert_allclose(tr.c.sum(-1), 1, rtol=1e-5)
    with torch.no_grad():
        out = capsnet(torch.tensor(IMAGE).view(1, 1, 28, 28), record=True)
    np.testing.assert_allclose(tr.lengths[-1], out.scores[0].numpy(), rtol=1e-5)
    np.testing.assert_allclose(tr.c, out.trace.c[:, 0].numpy(), rtol=1e-6)
    # a coupling map cell is the mean over the 4 types at that grid position
    np.testing.assert_allclose(tr.coupling_maps(1)[7, 2, 3], tr.c[1, (2 * 6 + 3) * 4 : (2 * 6 + 3) * 4 + 4, 7].mean(), rtol=1e-6)
    np.testing.assert_allclose(tr.by_capsule(tr.c[2, :, 5])[1, 2 * 6 + 3], tr.c[2, (2 * 6 + 3) * 4 + 1, 5])
    np.testing.assert_allclose(tr.entropy[0], np.log(10), rtol=1e-5)  # uniform first iteration
    np.testing.assert_allclose(tr.c_change, np.abs(np.diff(tr.c, axis=0)).mean((1, 2)))
    assert tr.b_change.shape == (3,) and (tr.b_change >= 0).all()


def test_batch_b_change_and_iteration_sweep(capsnet):
    imgs = torch.rand(5, 28, 28)
    m = mean_b_change(capsnet, imgs, 4)
    per = [dynamic_trace(capsnet, imgs[i].numpy(), 4).b_change for i in range(5)]
    np.testing.assert_allclose(m, np.mean(per, 0), rtol=1e-4)
    sweep = iteration_sweep(capsnet, IMAGE, 4)
    assert sweep["lengths"].shape == (4, 10) and len(sweep["reconstructions"]) == 4
    np.testing.assert_allclose(sweep["lengths"][2], dynamic_trace(capsnet, IMAGE, 3).lengths[-1], rtol=1e-5)
    torch.manual_seed(0)
    loud = build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)).eval()
    with torch.no_grad():  # long capsules, so that the decoder's output depends visibly on them
        for w in loud.digits.parameters():
            w.mul_(1000)
    sweep = iteration_sweep(loud, IMAGE, 4)
    for t in range(1, 5):  # one long run's prefixes == separate runs of 1..4 iterations, decoded by their winners
        with torch.no_grad():
            out = loud(torch.as_tensor(IMAGE)[None, None], iterations=t)
        np.testing.assert_allclose(sweep["lengths"][t - 1], out.scores[0].numpy(), rtol=1e-5, atol=1e-7)
        assert sweep["predictions"][t - 1] == int(out.scores[0].argmax())
        np.testing.assert_allclose(sweep["reconstructions"][t - 1], out.reconstruction[0].numpy(), rtol=1e-4, atol=1e-6)


def test_vote_histogram_weights_sum_to_each_capsules_total_assignment(matrix):
    tr = em_trace(matrix, IMAGE, 3)
    T, I, J = tr.R.shape
    bins = np.linspace(0, tr.distances.max() * 1.001, 25)
    h = vote_histograms(tr, bins)
    assert h.shape == (T, J, 24)
    np.testing.assert_allclose(h.sum(-1), tr.R.sum(1), rtol=1e-5)
    # a zoom drops the far votes but never invents weight
    zoom = vote_histograms(tr, np.linspace(0, np.median(tr.distances), 11))
    assert (zoom.sum(-1) <= tr.R.sum(1) + 1e-6).all()
    # the same histogram by numpy, one capsule at a time
    ref, _ = np.histogram(tr.distances[1, :, 4], bins=bins, weights=tr.R[1, :, 4].astype(np.float64))
    np.testing.assert_allclose(h[1, 4], ref, rtol=1e-5, atol=1e-9)
    assert set(tr.layers) == {"convcaps1", "convcaps2", "class"}
    np.testing.assert_allclose(
        tr.a[-1], matrix(torch.tensor(IMAGE).view(1, 1, 28, 28), iterations=3).scores[0].detach().numpy(), rtol=1e-4, atol=1e-6
    )


def test_perturbation_grid_rows_change_one_dimension(capsnet):
    p = predict(capsnet, IMAGE)
    grid = perturbation_grid(capsnet, p.capsules[p.predicted], p.predicted)
    assert grid.shape == (16, 11, 28, 28) and STEPS[5] == 0
    np.testing.assert_allclose(grid[3, 5], p.reconstruction, rtol=1e-5, atol=1e-6)
    d = np.zeros(16, np.float32)
    d[3] = STEPS[-1]
    np.testing.assert_allclose(grid[3, -1], decode(capsnet, p.capsules[p.predicted], p.predicted, d), rtol=1e-5, atol=1e-6)
    eff = dimension_effect(grid)
    assert eff.shape == (16,) and (eff >= 0).all()


class _Votes(torch.nn.Module):
    """A stand-in CapsNet whose predictions are fixed: every primary capsule's vote for class 0
    points one way (scaled by `strength`), the votes for other classes are random and disagree."""

    def __init__(self, strength: float):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        u = torch.randn(1, 10, 64, 16, generator=g) * 0.2
        u[:, 0] = strength * torch.nn.functional.normalize(torch.ones(16), dim=0)
        self.u = u

    def predictions(self, x):
        return self.u.expand(len(x), -1, -1, -1)

    def route(self, u_hat, *, routing=None, iterations=None, record=False):
        from capsviz.routing import route

        return route(routing or "dynamic", u_hat, iterations=iterations, record=record)


def test_coupling_summary_sees_routing_concentrate_only_when_votes_agree():
    images = torch.zeros(3, 28, 28)
    strong = coupling_summary(_Votes(2.0), images, 3)
    weak = coupling_summary(_Votes(0.05), images, 3)
    for s in (strong, weak):
        assert s["n_images"] == 3 and len(s["coupling_to_prediction"]) == 3
        assert abs(s["coupling_to_prediction"][0] - 0.1) < 1e-6  # the first iteration is uniform
        assert abs(s["entropy"][0] - s["uniform_entropy"]) < 1e-5
    assert strong["coupling_to_prediction"][-1] > 0.5 and strong["entropy"][-1] < 1.5  # agreeing votes win the coupling
    assert weak["coupling_to_prediction"][-1] < 0.12  # short votes hardly move b
    assert strong["vote_weighted_coupling_to_prediction"][-1] > 0.5


def test_figures_read_as_classes_and_whole_iterations():
    from capsviz.viz import capsule_bars, heatmap, lines

    fig = capsule_bars(np.linspace(0, 0.9, 10), range(10), (2, 7), "two predictions")
    assert fig.layout.xaxis.type == "category"  # ten digit labels, not a number line ticked 0, 2, 4
    red = [i for i, c in enumerate(fig.data[0].marker.color) if c == "#d62728"]
    assert red == [2, 7]
    assert [i for i, c in enumerate(capsule_bars(np.ones(10), range(10), 4, "").data[0].marker.color) if c == "#d62728"] == [4]
    assert lines(np.zeros((3, 2)), ["a", "b"], "", "iteration", "").layout.xaxis.dtick == 1
    assert lines(np.zeros((3, 2)), ["a", "b"], "", "x", "", x=np.array([0.1, 0.2, 0.3])).layout.xaxis.dtick is None
    assert heatmap(np.zeros((10, 4)), "", "", "class", y=[str(k) for k in range(10)]).layout.yaxis.type == "category"


def test_class_maps_lay_each_class_map_out_once_with_gaps():
    from capsviz.viz import class_maps

    maps = np.random.default_rng(0).random((10, 6, 6))
    fig = class_maps(maps, [f"c{j}" for j in range(10)], "")
    (trace,) = fig.data  # one trace: the browser redraws it far faster than 10 subplots
    z = np.array(trace.z, dtype=float)
    assert z.shape == (2 * 8 - 2, 5 * 7 - 1)  # two rows of five: a phone's chart keeps each map several pixels a square
    for j in range(10):
        r, c = divmod(j, 5)
        np.testing.assert_array_equal(z[8 * r : 8 * r + 6, 7 * c : 7 * c + 6], maps[j])
    assert np.isnan(z[:, 6::7]).all() and np.isnan(z[6:8]).all()  # the gaps between maps and between rows
    assert np.isfinite(z).sum() == maps.size
    names = {(round(a.x, 1), round(a.y, 1)): a.text for a in fig.layout.annotations}
    assert names == {(7 * (j % 5) + 2.5, 8 * (j // 5) - 0.6): f"c{j}" for j in range(10)}  # each map named above it
    assert trace.customdata[8 + 2][7 * 3 + 4].tolist() == ["c8", 3, 5]  # hover names the class, row and column (from 1, as the tour counts)
    one_row = class_maps(maps[:3], ["a", "b", "c"], "", per_row=5)
    assert np.array(one_row.data[0].z, dtype=float).shape == (6, 3 * 7 - 1)  # fewer maps than a row holds: one row, no blank maps


class _Wrong:
    """A stand-in model that gets exactly the images `wrong` wrong, and counts what it reads."""

    def __init__(self, wrong):
        self.wrong, self.seen = set(wrong), 0

    def __call__(self, x):
        from types import SimpleNamespace

        self.seen += len(x)
        ids = x.flatten(1)[:, 0].round().long()  # pixel 0 holds the image's own index (below)
        scores = torch.zeros(len(x), 10)
        scores[:, 0] = 1
        scores[[i for i, k in enumerate(ids.tolist()) if k in self.wrong], 0] = -1
        return SimpleNamespace(scores=scores)


def test_find_mistake_draws_every_mistake_evenly_and_stops_early():
    from capsviz.analysis import find_mistake

    n = 2000
    images = torch.zeros(n, 28, 28)
    images[:, 0, 0] = torch.arange(n, dtype=torch.float32) * 255  # find_mistake divides by 255: pixel 0 is the index
    labels = torch.zeros(n, dtype=torch.long)
    wrong = [17, 450, 1999]
    model = _Wrong(wrong)
    hits = [find_mistake(model, images, labels, seed) for seed in range(300)]
    assert set(hits) == set(wrong)
    assert min(hits.count(k) for k in wrong) > 60  # about 100 each: uniform over the mistakes
    assert model.seen < 300 * n / 2  # stops at the first mistake, on average well before the end
    assert find_mistake(_Wrong([]), images, labels, 0) is None


def test_coupling_frames_share_one_scale_and_animate():
    import io

    from PIL import Image

    from capsviz.viz.animation import coupling_frames, gif_bytes

    maps = np.full((2, 10, 6, 6), 0.1, np.float32)
    maps[1, 7, 2:4, 2:4] = 0.3  # iteration 2: capsule 7 takes the middle
    image = np.zeros((28, 28), np.float32)
    frames = coupling_frames(maps, image, [str(k) for k in range(10)])
    assert len(frames) == 2 and frames[0].size == frames[1].size
    red = [np.asarray(f).astype(int) for f in frames]
    redness = [(r[..., 0] - r[..., 1] > 100).sum() for r in red]
    assert redness[0] == 0 and redness[1] > 50  # uniform couplings draw no red on the shared scale
    gif = Image.open(io.BytesIO(gif_bytes(frames)))
    assert gif.n_frames == 2
    assert np.array_equal(np.asarray(coupling_frames(maps, image, [str(k) for k in range(10)], only=1)[0]), red[1])
