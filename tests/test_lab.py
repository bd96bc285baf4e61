"""The routing lab (capsviz.analysis.lab, pages/lab.py): measures, stored rows, and sentences that
follow the table they sit under."""

import json
import re
import statistics
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest
from test_plain_text import as_shown

from capsviz.analysis import lab, rules, stored
from capsviz.checkpoint import list_checkpoints, load_checkpoint, save_checkpoint
from capsviz.config import preset
from capsviz.data import load_split
from capsviz.models import build_model
from capsviz.routing import ROUTINGS
from capsviz.text import plain

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


def row(model="m", trained="dynamic", run="dynamic", err=0.5, n=10_000, shifted=90.0, fgsm=50.0, m=1000, arch="capsnet-small", **kw):
    fields = dict(entropy_ratio=0.99, coupling_to_prediction=0.11, ms_per_image=0.4, pair_accuracy=None, n_pairs=0)
    fields.update(kw)
    return lab.Row(
        model=model,
        trained_with=trained,
        run_with=run,
        test_error=err,
        n_test=n,
        shifted_accuracy=shifted,
        fgsm_accuracy=fgsm,
        n_images=m,
        extra={"architecture": arch},
        **fields,
    )


def small_model(couplings="dynamic", seed=0):
    torch.manual_seed(seed)
    cfg = preset("capsnet-small", num_classes=10)
    from dataclasses import replace

    return build_model(replace(cfg, couplings=couplings)).eval()


def test_running_with_another_routing_leaves_the_shared_model_and_its_answers_unchanged():
    model = small_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.rand(4, 1, 28, 28)
    own = model.classify(x).scores
    for routing in ROUTINGS:
        run = lab.RunWith(model, routing, 3 if routing == "dynamic" else None)
        torch.testing.assert_close(run.classify(x).scores, model(x, reconstruct=False, routing=routing, iterations=run.iterations).scores)
    torch.testing.assert_close(model.classify(x).scores, own)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.config.couplings == "dynamic"


def test_two_sessions_running_one_model_with_different_routings_at_once_get_their_own_answers():
    model = small_model()
    x = torch.rand(6, 1, 28, 28)
    alone = {r: lab.RunWith(model, r).classify(x).scores for r in ("uniform", "dynamic")}
    got, errors = {}, []

    def session(routing):
        try:
            for _ in range(10):
                got.setdefault(routing, []).append(lab.RunWith(model, routing).classify(x).scores)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=session, args=(r,)) for r in ("uniform", "dynamic")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r, answers in got.items():
        for a in answers:
            torch.testing.assert_close(a, alone[r])
    assert not torch.allclose(alone["uniform"], alone["dynamic"])


def test_trained_with_reads_one_iteration_as_uniform_couplings():
    from dataclasses import replace

    cfg = preset("capsnet-small", num_classes=10)
    assert lab.trained_with(cfg) == "dynamic"
    assert lab.trained_with(replace(cfg, routing_iterations=1)) == "uniform"
    assert lab.trained_with(replace(cfg, couplings="random")) == "random"
    assert lab.trained_with(preset("efficient-capsnet", num_classes=10)) == "self-attention"
    assert lab.fits(preset("efficient-capsnet", num_classes=10)) and lab.fits(cfg)
    assert not lab.fits(preset("matrix-small", num_classes=10)) and not lab.fits(preset("cnn-small", num_classes=10))


def test_shifted_digits_are_a_fixed_draw_that_moves_them():
    x = torch.zeros(8, 1, 28, 28)
    x[:, :, 10:18, 12:16] = 1.0
    a, b = lab.shifted(x), lab.shifted(x)
    assert torch.equal(a, b)
    assert not torch.allclose(a, x)
    centre = lambda im: im[:, 0].sum(1).argmax(1).float()  # noqa: E731 - the brightest column per image
    assert (centre(a) - centre(x)).abs().max() <= lab.SHIFT_PX + 4  # moved by the shift and the turn, not more


def test_spread_and_noise():
    assert rules.spread(0.5, 10_000) == pytest.approx(200 * (0.005 * 0.995 / 10_000) ** 0.5, rel=0.02)
    assert rules.noise(0.5, 10_000, 0.5, 10_000) == pytest.approx(rules.spread(0.5, 10_000) * 2**0.5)
    assert rules.spread(0.5, 1000) > rules.spread(0.5, 10_000)
    assert rules.spread(0.0, 18) > 5  # no error on 18 images is far from a certain 0%


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+\.\d+", text.replace(",", ""))]


def details(rows, model="m"):
    """The sentences of one model's folded details."""
    return lab.report(rows).models[model]


def test_sentences_say_no_difference_beyond_chance_when_the_difference_is_and_quote_the_table():
    rows = [row(err=0.55), row(run="uniform", err=0.60)]
    (said, *_) = details(rows)
    assert "**m** (trained with dynamic) run with **uniform**" in said
    assert "test error 0.60% against 0.55% (within chance" in said
    assert "no measure differs beyond chance: on these test images, uniform and dynamic cannot be told apart" in said
    assert "as well as" not in said  # no equality is claimed where only "no difference beyond chance" was measured
    assert "better" not in said and "worse" not in said
    band = rules.noise(0.60, 10_000, 0.55, 10_000)
    assert f"±{band:.2f}" in said


@pytest.mark.parametrize("times, verb", [(0.9, "within chance"), (1.1, "worse")])
def test_a_difference_is_called_one_only_beyond_the_chance_band(times, verb):
    band = rules.noise(1.0, 10_000, 1.0, 10_000)  # about the band of two errors near 1%
    err = round(1.0 + times * band, 2)
    (said, *_) = details([row(err=1.0), row(run="uniform", err=err)])
    assert f"test error {err:.2f}% against 1.00% ({verb}" in said
    assert ("worse on test error." in said) == (verb == "worse")


def test_sentences_call_a_difference_beyond_chance_better_or_worse_by_the_measure():
    rows = [row(err=0.50, shifted=90.0, fgsm=40.0), row(run="random", err=2.00, shifted=95.0, fgsm=40.5)]
    said = details(rows)[0]
    assert "test error 2.00% against 0.50% (worse" in said
    assert "accuracy on shifted and turned images 95.00% against 90.00% (better" in said
    assert "accuracy under FGSM 40.50% against 40.00% (within chance" in said
    assert "better on accuracy on shifted and turned images; worse on test error." in said
    assert not lab.report(rows).across  # no masking note without a better FGSM accuracy
    masked = lab.report([row(fgsm=30.0), row(run="self-attention", fgsm=45.0)])
    assert "better on accuracy under FGSM" in masked.models["m"][0] and "gradient masking" in masked.across[-1]


def test_sentences_on_training_with_routing_follow_the_errors():
    same = [row(model="a", trained="dynamic", err=0.55), row(model="b", trained="uniform", run="uniform", err=0.58)]
    text = " ".join(lab.sentences(same))
    assert "none of these routings trained a model better than another beyond chance" in text
    assert "no routing trained" not in text  # "no routing" is the app's name for uniform couplings
    assert "best first: dynamic 0.55%, uniform 0.58%" in text
    assert "how far the seed alone moves these models was not measured" in text
    apart = [row(model="a", trained="dynamic", err=0.50), row(model="b", trained="uniform", run="uniform", err=1.50)]
    text = " ".join(lab.sentences(apart))
    assert "trained with dynamic is best, 1.00 points ahead of uniform" in text
    assert "pair accuracy" not in text
    pairs = [
        row(model="a", trained="dynamic", err=0.5, pair_accuracy=80.0, n_pairs=1000),
        row(model="b", trained="uniform", run="uniform", err=0.5, pair_accuracy=90.0, n_pairs=1000),
    ]
    text = " ".join(lab.sentences(pairs))
    assert "MultiMNIST pair accuracy on 1,000 pairs, best first: uniform 90.00%, dynamic 80.00%" in text
    assert "trained with uniform is best, 10.00 points ahead of dynamic" in text
    other_arch = [row(model="a", err=0.5), row(model="b", trained="uniform", run="uniform", err=1.5, arch="efficient-capsnet")]
    assert "trained with different routings" not in " ".join(lab.sentences(other_arch))


def meta_of(couplings, seed, error, epochs=3, n_test=10_000, model="capsnet-small", hardware="AMD EPYC"):
    from dataclasses import replace

    from capsviz.schema import CheckpointMeta, Metrics

    cfg = replace(preset("capsnet-small", num_classes=10), couplings=couplings)
    run = {"model": model, "batch_size": 128, "lr": 1e-3, "lr_decay": 0.96, "decay_steps": 2000, "seed": seed}
    return CheckpointMeta(cfg, "0" * 64, "mnist", Metrics(test_error=error, n_test=n_test), run=run, epochs=epochs, hardware=hardware)


def test_a_seed_study_groups_errors_by_routing_in_seed_order_and_refuses_mixed_runs(tmp_path):
    metas = [meta_of(c, s, e) for c, s, e in [("dynamic", 1, 0.9), ("uniform", 0, 1.1), ("dynamic", 0, 1.0), ("uniform", 1, 0.8)]]
    study = lab.seed_study(metas)
    assert study.seeds == (0, 1) and study.errors == {"dynamic": [1.0, 0.9], "uniform": [1.1, 0.8]}
    assert study.preset_and_data == "capsnet-small on mnist" and "seed" not in study.architecture and "3 epochs" in study.architecture
    stored.write(lab.seeds_key(study), study.stored(), tmp_path)
    assert lab.stored_studies([tmp_path]) == [study]
    (tmp_path / "seeds-broken.json").write_text('{"architecture": "x", "seeds": [0, 1], "dynamic": [1.0]}')
    assert lab.stored_studies([tmp_path]) == [study]  # one error for two seeds: left out
    with pytest.raises(ValueError, match="more than routing and seed"):
        lab.seed_study(metas + [meta_of("random", 0, 1.0, epochs=12), meta_of("random", 1, 1.0, epochs=12)])
    with pytest.raises(ValueError, match="same seeds"):
        lab.seed_study(metas + [meta_of("random", 0, 1.0)])
    with pytest.raises(ValueError, match="different numbers"):
        lab.seed_study([meta_of("dynamic", 0, 1.0), meta_of("dynamic", 1, 1.0, n_test=500)])


def test_a_model_folder_with_every_routing_trained_from_the_same_seeds_holds_a_study():
    one_seed = [meta_of("dynamic", 0, 0.55, epochs=12), meta_of("uniform", 0, 0.57, epochs=12), meta_of("random", 0, 0.63, epochs=12)]
    assert lab.studies_in(one_seed) == []  # the shipped models: one seed each, no study
    two = [meta_of(c, s, 1.0 + s / 10) for c in ("dynamic", "uniform") for s in (0, 1)]
    (study,) = lab.studies_in(one_seed + two)
    assert study.errors == {"dynamic": [1.0, 1.1], "uniform": [1.0, 1.1]} and "3 epochs" in study.architecture
    assert lab.studies_in(two[:3]) == []  # uniform with one seed only: not a study


def test_a_study_names_its_training_image_limit_and_whose_models_it_is_made_of():
    full = [meta_of(c, s, 1.0) for c in ("dynamic", "uniform") for s in (0, 1)]
    few = []
    for m in full:
        few.append(replace(m, run={**m.run, "train_limit": 256}))
    assert lab.architecture(few[0], seed=False) == lab.architecture(full[0], seed=False) + ", 256 training images"
    (study,) = lab.studies_in(few, names=["d0", "d1", "u0", "u1"])
    assert "256 training images" in study.architecture and study.models == ("d0", "d1", "u0", "u1") and not study.shipped
    assert study.title() == "Trained here, over 2 seeds: capsnet-small on mnist (the models d0, d1, u0, u1)"
    assert lab.SeedStudy.from_stored(study.stored(), shipped=True).title() == "Trained with, over 2 seeds: capsnet-small on mnist"


@pytest.mark.parametrize(
    "bad",
    [
        {"seeds": [], "dynamic": []},  # no seeds: no mean to take
        {"seeds": [0], "dynamic": [1.0]},
        {"seeds": [0, 0], "dynamic": [1.0, 1.0]},
        {"seeds": [0, 1], "dynamic": [1.0, 500.0]},
        {"seeds": [0, 1], "dynamic": [1.0, 1.0], "n_test": 0},
        {"seeds": [0, 1], "dynamic": [1.0, 1.0], "architecture": 7},
        {"seeds": ["a", "b"], "dynamic": [1.0, 1.0]},
    ],
)
def test_a_malformed_stored_study_is_left_out_with_its_name(tmp_path, bad):
    (tmp_path / "seeds-bad.json").write_text(json.dumps({"architecture": "x", "n_test": 100, **bad}))
    skipped = []
    assert lab.stored_studies([tmp_path], skipped) == [] and skipped == ["seeds-bad.json"]


@pytest.mark.parametrize("field_, value", [("test_error", "high"), ("n_test", 0), ("fgsm_accuracy", None), ("hardware", 3)])
def test_a_malformed_stored_row_is_measured_again_and_named(field_, value):
    good = row().stored()
    with pytest.raises((TypeError, ValueError)):
        lab.Row.from_stored(
            {**good, field_: value} if value is not None else {k: v for k, v in good.items() if k != field_}, "m", "dynamic", "dynamic", "a"
        )


def test_seed_sentences_compare_routings_against_the_spread_the_seeds_give():
    close = lab.SeedStudy("capsnet-small on mnist, 3 epochs", (0, 1, 2), {"dynamic": [0.9, 1.0, 1.1], "uniform": [1.0, 1.1, 0.9]}, 10_000)
    text = " ".join(lab.seed_sentences(close))
    assert "trained with dynamic: mean 1.00% (from 0.90 to 1.10, standard deviation 0.10)" in text
    band = 2 * (0.1**2 / 3 + 0.1**2 / 3) ** 0.5
    assert f"0.00 points lower, within the ±{band:.2f} the seeds give" in text
    assert "made no difference beyond what the training seed makes" in text
    assert f"about {2 * 2**0.5 * 0.1:.2f} points apart" in text
    far = lab.SeedStudy("a", (0, 1, 2), {"dynamic": [0.9, 1.0, 1.1], "random": [2.0, 2.1, 1.9]}, 10_000)
    text = " ".join(lab.seed_sentences(far))
    assert "dynamic against random: 1.00 points lower, beyond" in text and "made a difference" in text
    rows = [
        row(model="a", trained="dynamic", err=0.55, arch="capsnet-small on mnist, 12 epochs"),
        row(model="b", trained="uniform", run="uniform", err=0.58, arch="capsnet-small on mnist, 12 epochs"),
    ]
    assert "measured below (3 seeds per routing" in " ".join(lab.sentences(rows, [close]))


def test_the_shipped_seed_study_is_stored_and_read_back():
    studies = lab.stored_studies([stored.shipped_folder()])
    assert studies, "run `python -m capsviz.analysis.lab --seeds RUN_FILES...` (RESULTS.md)"
    for study in studies:
        assert len(study.seeds) >= 3 and set(study.errors) >= {"dynamic", "uniform", "random"} and study.n_test == 10_000


def coupling_line(**kw):
    (said,) = [line for line in details([row(**kw)]) if line.startswith("With ")]
    return said


@pytest.mark.parametrize(
    "entropy, share, classes, word, parts",
    [
        (
            0.997,
            0.108,
            10,
            "near uniform",
            [
                "evenness is 99.7% (100% = spread evenly over all 10 classes), more than 95%",
                "gets 0.11 on average, less than 1.5 times the uniform 0.10",
            ],
        ),
        (
            0.94,
            0.108,
            10,
            "away from uniform",
            [
                "evenness is 94.0% (100% = spread evenly over all 10 classes), not more than 95%",
                "gets 0.11 on average, less than 1.5 times",
            ],
        ),
        (
            0.96,
            0.16,
            10,
            "away from uniform",
            [
                "evenness is 96.0% (100% = spread evenly over all 10 classes), more than 95%, but",
                "gets 0.16 on average, at least 1.5 times the uniform 0.10",
            ],
        ),
        (
            0.96,
            0.29,
            5,
            "near uniform",
            ["evenness is 96.0% (100% = spread evenly over all 5 classes)", "gets 0.29 on average, less than 1.5 times the uniform 0.20"],
        ),
    ],
)
def test_the_couplings_sentence_says_both_parts_of_the_near_uniform_rule(entropy, share, classes, word, parts):
    said = coupling_line(entropy_ratio=entropy, coupling_to_prediction=share, classes=classes)
    assert f"are {word}" in said and all(p in said for p in parts), said
    assert said.startswith("With dynamic routing, **m**'s couplings")
    attention = coupling_line(run="self-attention", trained="self-attention", entropy_ratio=0.90, coupling_to_prediction=0.2)
    assert attention.startswith("With self-attention routing") and "away from uniform" in attention


QUICK, SLOW = (0.30, 0.31, 0.29, 0.30, 0.32), (0.60, 0.62, 0.59, 0.61, 0.60)


def time_line(dynamic=SLOW, uniform=QUICK, load=0.5, cores=2, hardware=("cpu", "cpu"), **kw):
    d = row(ms_per_image=statistics.median(dynamic), ms_samples=dynamic, load=load, cores=cores, hardware=hardware[0], **kw)
    u = row(run="uniform", ms_per_image=statistics.median(uniform), ms_samples=uniform, load=load, cores=cores, hardware=hardware[1], **kw)
    (said,) = [line for line in details([d, u]) if "ms" in line]
    return said


def test_a_speed_is_claimed_only_from_repeated_timings_apart_on_a_quiet_machine():
    said = time_line()
    assert "dynamic routing takes 0.60 ms (median of 5, 0.59 to 0.62)" in said and "0.30 ms (median of 5, 0.29 to 0.32)" in said
    assert f"one pass with uniform couplings is {0.60 / 0.30:.1f}x faster" in said and "Load 0.5 on 2 cores" in said
    overlapping = time_line(uniform=(0.30, 0.31, 0.61, 0.30, 0.32))
    assert "x faster" not in overlapping and "overlap" in overlapping
    few = time_line(dynamic=SLOW[:4])
    assert "x faster" not in few and f"only from {rules.MIN_TIMINGS} timings or more" in few
    for busy in (time_line(load=2.1, cores=2), time_line(load=8.0, cores=4)):
        assert (
            "x faster" not in busy and "the machine was busy while timing them" in busy and "nothing is said about which is faster" in busy
        )
    assert "x faster" in time_line(load=2.0, cores=2)  # at the cores: not busy
    assert "x faster" not in time_line(cores=0) and "cores was not recorded" in time_line(cores=0)
    assert "x faster" not in time_line(hardware=("a", "b")) and "different machines" in time_line(hardware=("a", "b"))


def test_busy_means_a_load_average_above_the_cores():
    assert not rules.busy(1.9, 2) and not rules.busy(2.0, 2) and rules.busy(2.1, 2)
    assert rules.busy(0.1, 0)  # cores not recorded: nothing can be claimed
    assert "busy" in rules.RULES and "load average" in rules.RULES["busy"]


def test_a_row_stored_before_repeated_timings_loads_and_claims_no_speed(tmp_path):
    old = {k: v for k, v in row(ms_per_image=1.8, load=1.2).stored().items() if k not in ("ms_samples", "cores")}
    d = lab.Row.from_stored(old, "m", "dynamic", "dynamic", "a")
    u = lab.Row.from_stored({**old, "ms_per_image": 0.16}, "m", "dynamic", "uniform", "a")  # 11x faster, once
    assert d.timing.samples == (1.8,) and d.cores == 0
    (said,) = [line for line in details([d, u]) if "ms" in line]
    assert "1.80 ms (one timing)" in said and "0.16 ms (one timing)" in said and "x faster" not in said
    with pytest.raises(ValueError, match="ms_samples"):
        lab.Row.from_stored({**old, "ms_samples": [1.0, "slow"]}, "m", "dynamic", "dynamic", "a")


def test_a_row_is_stored_as_numbers_and_read_back_whole(tmp_path):
    r = row(pair_accuracy=91.5, n_pairs=200, hardware="AMD EPYC, 2 cores (cpu)", load=1.5, cores=2, ms_samples=(0.4, 0.5, 0.41))
    value = r.stored()
    stored.write("lab-x", value, tmp_path)
    back = lab.Row.from_stored(stored.read("lab-x", [tmp_path]), "m", "dynamic", "dynamic", "capsnet-small")
    assert back == r


def test_retime_takes_turns_and_gives_every_routing_its_timings():
    model = small_model()
    runs = {r: lab.RunWith(model, r) for r in ("dynamic", "uniform")}
    timed = lab.retime(runs, torch.rand(4, 1, 28, 28), repeats=5)
    assert set(timed) == {"dynamic", "uniform"} and all(len(t) == 5 and min(t) > 0 for t in timed.values())


def test_run_lab_measures_once_then_reads_the_stored_rows(synthetic_data, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    for couplings in ("dynamic", "uniform"):
        m = small_model(couplings)
        meta = {"dataset": "mnist", "run": {"model": "capsnet-small"}}
        save_checkpoint(folder / f"small-{couplings}.safetensors", m, meta)
    entries = [(p, meta) for p, meta in list_checkpoints(folder)]
    settings = lab.Settings(test_images=60, images=20)
    loads = []

    def load(p):
        loads.append(p.stem)
        return load_checkpoint(p)[0]

    data = lambda meta: load_split(meta.image_dataset, "test")  # noqa: E731
    out = tmp_path / "store"
    first = lab.run_lab(entries, ["dynamic", "uniform"], load, data, settings, folders=[out], into=out)
    assert len(first) == 4 and len(loads) == 4 and len(list(out.iterdir())) == 4
    again = lab.run_lab(entries, ["dynamic", "uniform"], load, data, settings, folders=[out], into=out)
    assert len(loads) == 4  # nothing measured or loaded the second time
    for a, b in zip(first, again, strict=True):
        for name in lab.MEASURES:
            assert getattr(a, name) == pytest.approx(getattr(b, name))
    assert {(r.model, r.trained_with, r.run_with) for r in first} == {
        (f"small-{c}", c, r) for c in ("dynamic", "uniform") for r in ("dynamic", "uniform")
    }
    assert len({r.extra["architecture"] for r in first}) == 1 and first[0].extra["architecture"].startswith("capsnet-small on mnist")
    assert lab.sentences(first)  # something is said about them


def shipped_rows():
    folder = ROOT / "checkpoints"
    entries = [(p, m) for p, m in list_checkpoints(folder) if not isinstance(m, str) and lab.fits(m.config)]
    return entries, lab.stored_rows(entries, ROUTINGS, folders=[stored.shipped_folder()])


def test_every_shipped_vector_capsule_model_has_its_lab_rows_stored():
    entries, have = shipped_rows()
    assert entries
    missing = [(p.stem, r) for p, _ in entries for r in ROUTINGS if (p.stem, r) not in have]
    assert not missing, f"run `python -m capsviz.analysis.lab`: missing {missing}"


def test_a_stored_lab_row_equals_a_fresh_run(real_data):
    entries, have = shipped_rows()
    path, meta = next((p, m) for p, m in entries if p.stem == "capsnet-small-mnist")
    model, _ = load_checkpoint(path)
    fresh = lab.measure(model, path.stem, "uniform", load_split("mnist", "test"))
    kept = have[path.stem, "uniform"]
    assert fresh.test_error == pytest.approx(kept.test_error, abs=0.03)  # up to 3 of 10,000 images rounded otherwise
    assert fresh.shifted_accuracy == pytest.approx(kept.shifted_accuracy, abs=0.3)
    assert fresh.fgsm_accuracy == pytest.approx(kept.fgsm_accuracy, abs=0.3)
    assert fresh.entropy_ratio == pytest.approx(kept.entropy_ratio, abs=1e-4)
    assert fresh.coupling_to_prediction == pytest.approx(kept.coupling_to_prediction, abs=1e-4)


def test_the_lab_page_opens_at_once_with_the_stored_rows_and_sentences_that_quote_them(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/lab.py").run()
    assert not at.exception
    assert not [b for b in at.button if b.label == "Run the lab"]  # stored: no button to press
    table = at.dataframe[0].value
    chosen = at.multiselect(key="lab_models").value
    assert len(table) == len(chosen) * len(ROUTINGS)
    text = " ".join(m.value for m in at.markdown)
    for _, r in table.iterrows():
        assert f"{r['error %']:.2f}%" in text  # every error in the table is quoted under it
    headings = [h.value for h in at.subheader]
    assert headings.index("Does routing matter? The short answer") < headings.index("The table")  # the answer first ...
    assert headings.index("What others found (published, not measured here)") < headings.index("The table")  # ... the papers beside
    folded = [e.label for e in at.main.expander]
    assert sorted(label.split(",")[0] for label in folded) == sorted(chosen)  # ... then each model's details, folded
    assert "None" not in set(table["pair acc. %"])
    shown = [m.value for m in at.markdown]
    (study,) = [s for s in lab.stored_studies() if s.shipped]
    for line in lab.seed_sentences(replace(study, architecture=plain(study.architecture))):
        assert "- " + line in shown  # whole: the conclusion is not cut at plain()'s length for a name
    assert any(line.endswith("beyond what the training seed makes.") or line.endswith("where it says so.") for line in shown)
    assert not at.info
    at.multiselect(key="lab_routings").set_value(["uniform", "random", "self-attention"]).run()
    assert not at.exception
    assert any(i.value.startswith("Hidden under *Run with*: dynamic.") for i in at.info)  # nothing dropped without a word


def test_the_lab_with_a_cnn_in_the_sidebar_opens_with_a_capsule_model_and_says_which(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = "cnn-small-mnist.safetensors"
    at.switch_page("pages/lab.py").run()
    assert not at.exception
    assert any("this page needs a vector-capsule model" in i.value for i in at.info)
    assert at.dataframe


def test_fewer_test_images_are_a_setting_of_their_own(synthetic_data):
    """Settings with no stored rows offer the run button and say how many rows are missing."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/lab.py").run()
    at.select_slider(key="lab_test").set_value(1000).run()
    assert not at.exception
    assert [b for b in at.button if b.label == "Run the lab"]
    assert any("rows are not stored for these settings yet" in c.value for c in at.caption)


def test_models_trained_from_the_same_seeds_with_each_routing_show_as_a_seed_study_on_the_page(synthetic_data, tmp_path, monkeypatch):
    """Models a user trained (say from the Train page) with two routings from two seeds each."""
    folder = tmp_path / "models"
    folder.mkdir()
    for couplings in ("dynamic", "uniform"):
        for seed, error in ((0, 20.0), (1, 30.0)):
            meta = {
                "dataset": "mnist",
                "run": {"model": "capsnet-small", "batch_size": 8, "lr": 1e-3, "seed": seed},
                "epochs": 1,
                "metrics": {"test_error": error + (couplings == "uniform"), "n_test": 200, "how": "fixture"},
            }
            save_checkpoint(folder / f"mine-{couplings}-{seed}.safetensors", small_model(couplings, seed), meta)
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(folder))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    entries = list_checkpoints(folder)
    # a study shipped with the app for the very same preset and schedule: the user's runs stand beside it
    shipped = tmp_path / "shipped-sweeps"
    monkeypatch.setattr(stored, "shipped_folder", lambda: shipped)
    same = lab.architecture(entries[0][1], seed=False)
    official = lab.SeedStudy(same, (0, 1, 2), {"dynamic": [0.9, 1.0, 1.1], "uniform": [1.0, 1.1, 0.9]}, 10_000, "GPU")
    stored.write(lab.seeds_key(official), official.stored(), shipped)
    (shipped / "seeds-damaged.json").write_text('{"architecture": "x", "seeds": [], "n_test": 1, "dynamic": []}')
    settings = lab.Settings(test_images=1000)
    data = lambda meta: load_split(meta.image_dataset, "test")  # noqa: E731
    lab.run_lab(entries, ["uniform"], lambda p: load_checkpoint(p)[0], data, settings)  # stored in this machine's cache
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["model"] = "mine-dynamic-0.safetensors"
    at.switch_page("pages/lab.py").run()
    at.multiselect(key="lab_routings").set_value(["uniform"])
    at.select_slider(key="lab_test").set_value(1000).run()
    assert not at.exception, at.exception
    headings = [as_shown(h.value) for h in at.subheader]
    assert "Trained with, over 3 seeds: capsnet-small on mnist" in headings  # the shipped study keeps its title ...
    mine = "Trained here, over 2 seeds: capsnet-small on mnist (the models mine-dynamic-0, mine-dynamic-1, mine-uniform-0, mine-uniform-1)"
    assert mine in headings  # ... and the user's runs are shown as theirs
    text = as_shown(" ".join(m.value for m in at.markdown))
    assert "trained with dynamic: mean 25.00% (from 20.00 to 30.00" in text and "trained with uniform: mean 26.00%" in text
    assert "trained with dynamic: mean 1.00% (from 0.90 to 1.10" in text  # the shipped numbers, not replaced
    assert any("could not be read and was left out" in as_shown(c.value) and "seeds-damaged.json" in as_shown(c.value) for c in at.caption)


def test_the_short_answer_counts_models_on_each_side_of_chance_and_quotes_their_errors():
    band = rules.noise(1.0, 10_000, 1.0, 10_000)
    within, worse = round(1.0 + 0.8 * band, 2), round(1.0 + 1.5 * band, 2)
    rows = [
        row(model="a", err=1.0),
        row(model="a", run="uniform", err=within),
        row(model="a", run="random", err=9.0),
        row(model="b", err=1.0, entropy_ratio=0.90, coupling_to_prediction=0.3),
        row(model="b", run="uniform", err=worse),
        row(model="b", run="random", err=round(1.0 - 1.5 * band, 2)),
    ]
    short = lab.report(rows).short
    uniform, random, better, couplings = short
    assert uniform.startswith("**Run without routing.**") and "(dynamic)" in uniform
    assert f"within chance on 1 of 2 models (**a** {within:.2f}% against 1.00%)" in uniform
    assert f"worse beyond chance on 1 of 2 models (**b** {worse:.2f}% against 1.00%)" in uniform
    assert "worse beyond chance on 1 of 2 models (**a** 9.00% against 1.00%)" in random
    assert f"better beyond chance on 1 of 2 models (**b** {1.0 - 1.5 * band:.2f}% against 1.00%)" in random
    assert better == (
        "**Better with another routing.** Beyond chance, by test error, or pair accuracy for a model that reads MultiMNIST "
        f"pairs: **b** (trained with dynamic) run with random: test error {1.0 - 1.5 * band:.2f}% against 1.00%."
    )
    assert "leaves the couplings near uniform on 1 of 2 models (they keep 99.0% of the uniform split's entropy)" in couplings
    assert "it moves them away from uniform on 1 of 2 models (**b**: 90.0% of the entropy, 0.30 to the predicted class" in couplings
    assert "more than 95% of the uniform split's entropy and less than 1.5 times" in couplings
    assert lab.short_answer([row(run="self-attention")]) == [lab.NO_ANSWER]  # nothing to answer with: said so
    (only_away,) = lab.short_answer([row(entropy_ratio=0.5, coupling_to_prediction=0.5)])
    assert only_away.startswith("**Couplings.**") and "dynamic routing moves the couplings away from uniform on this model (" in only_away


@pytest.mark.parametrize(
    "worse, verdict",
    [
        (0.62, "no gap beyond chance"),
        (1.50, "dynamic ahead of uniform beyond chance, but with one training seed each this gap may be the seed's"),
    ],
)
def test_the_short_answer_on_training_with_routing_says_beyond_chance_only_when_it_is(worse, verdict):
    rows = [row(model="a", trained="dynamic", err=0.55), row(model="b", trained="uniform", run="uniform", err=worse)]
    (trained,) = [s for s in lab.short_answer(rows) if s.startswith("**Trained with.**")]
    assert f"capsnet-small: test error dynamic 0.55%, uniform {worse:.2f}% ({verdict})" in trained
    assert "one training seed each" in trained


def test_hiding_a_routing_leaves_a_note_saying_what_is_left_out():
    full = [row(model="a", run=r) for r in ROUTINGS] + [row(model="b", trained="uniform", run=r) for r in ROUTINGS]
    assert lab.report(full).hidden == []
    without_dynamic = [r for r in full if r.run_with != "dynamic"]
    (note,) = lab.report(without_dynamic).hidden
    assert note.startswith("Hidden under *Run with*: dynamic.")
    assert "how **a**, trained with dynamic, fare with other routings than their own" in note
    assert "how far dynamic routing moves the couplings" in note and "the time of dynamic routing against uniform couplings" in note
    assert "**b**" not in note  # b's own routing is shown: nothing of b is left out but its dynamic row
    assert lab.report(without_dynamic).models["b"]  # b's sentences stay
    (note,) = lab.report([r for r in full if r.run_with not in ("uniform", "random")]).hidden
    assert "Hidden under *Run with*: uniform, random." in note and "**b**, trained with uniform" in note
    assert "running without routing" in note and "fixed random couplings" in note
    assert "whether a model does better run with uniform or random than with its own" in note


def test_the_table_shows_a_dash_where_pair_accuracy_does_not_apply_and_the_median_time():
    cells = lab.table([row(ms_per_image=0.5, ms_samples=(0.4, 0.5, 0.7)), row(run="uniform", pair_accuracy=91.234, n_pairs=100)])
    assert cells[0]["pair acc. %"] == "-" and cells[1]["pair acc. %"] == "91.23"
    assert cells[0]["ms / image"] == 0.5 and cells[0]["ms range"] == "0.40-0.70 (3 timings)" and cells[1]["ms range"] == "one timing"
    assert "None" not in lab.markdown([row(), row(run="uniform")])


def quoted_pairs(sentence: str) -> list[tuple[str, float, float]]:
    return [(m, float(a), float(b)) for m, a, b in re.findall(r"\*\*([^*]+)\*\* (\d+\.\d+)% against (\d+\.\d+)%", sentence)]


def test_the_short_answer_quotes_the_table_for_the_shipped_models():
    entries, have = shipped_rows()
    rows = list(have.values())
    cells = {(c["model"], c["run with"]): c for c in lab.table(rows)}
    own = {r.model: cells[r.model, r.run_with] for r in rows if r.run_with == r.trained_with}
    short = {s.split("**")[1]: s for s in lab.report(rows).short}
    assert set(short) == {"Run without routing.", "Random couplings.", "Better with another routing.", "Trained with.", "Couplings."}
    for lead, routing in (("Run without routing.", "uniform"), ("Random couplings.", "random")):
        said, _, digit = short[lead].partition(" By digit error alone")
        single, _, paired = said.partition("; for the ")
        assert quoted_pairs(single) and quoted_pairs(paired)  # the shipped models hold both kinds
        for part, column in ((single, "error %"), (paired, "pair acc. %")):
            for model, a, b in quoted_pairs(part):
                assert f"{a:.2f}" == f"{float(cells[model, routing][column]):.2f}", (model, routing)
                assert f"{b:.2f}" == f"{float(own[model][column]):.2f}", (model, routing)
                assert (cells[model, routing]["pair acc. %"] != "-") == (column == "pair acc. %")  # judged by pairs when it reads them
            counts = re.findall(r"on (\d+) of (\d+) models", part)
            assert len({n for _, n in counts}) == 1 and sum(int(k) for k, _ in counts) == int(counts[0][1])
        for model, a, b in re.findall(r"\*\*([^*]+)\*\*: [a-z ]+, (\d+\.\d+)% against (\d+\.\d+)%", digit):
            assert float(a) == cells[model, routing]["error %"] and float(b) == own[model]["error %"]
    better = short["Better with another routing."]
    assert "No model does better beyond chance" in better  # by the measure each model is judged by
    segments = better.split(" By digit error alone (one digit in the frame), ")[1:]
    assert segments  # capsnet-small-random-multimnist's digit error says otherwise
    for segment in segments:
        model = segment.split("**")[1]
        runs = re.findall(r"run with ([a-z-]+), digit error (\S+)% against (\S+)% but pair accuracy (\S+)% against (\S+)%", segment)
        assert runs
        for run, a, b, c, d in runs:
            assert (float(a), float(b)) == (cells[model, run]["error %"], own[model]["error %"])
            assert (c, d) == (cells[model, run]["pair acc. %"], own[model]["pair acc. %"])
    for routing, error in re.findall(r"(dynamic|uniform|random|self-attention) (\d+\.\d\d)%", short["Trained with."]):
        assert any(c["error %"] == float(error) or c["pair acc. %"] == error for c in own.values() if c["trained with"] == routing)
    dynamic = [c for c in cells.values() if c["run with"] == "dynamic"]
    lo, hi = re.search(r"they keep (\d+\.\d)% to (\d+\.\d)%", short["Couplings."]).groups()
    entropies = {c["entropy %"] for c in dynamic}
    assert float(lo) in entropies and float(hi) in entropies
    for model, entropy, share in re.findall(
        r"\*\*([^*]+)\*\*: (\d+\.\d)% of the entropy, (\d\.\d\d) to the predicted", short["Couplings."]
    ):
        assert cells[model, "dynamic"]["entropy %"] == float(entropy)
        assert cells[model, "dynamic"]["c to pred."] == pytest.approx(float(share), abs=0.005)
    n_dynamic = sum(int(k) for k in re.findall(r"on (\d+) of \d+ models", short["Couplings."]))
    assert n_dynamic == len(dynamic)


def test_a_pair_models_error_is_called_its_digit_error_and_the_table_defines_both_measures():
    pairs = dict(pair_accuracy=74.24, n_pairs=10_000)
    a = row(model="a", trained="dynamic", err=15.17, arch="capsnet-small on multimnist", **pairs)
    b = row(model="b", trained="random", run="random", err=17.5, arch="capsnet-small on multimnist", **pairs)
    assert a.error_words == "digit error" and row().error_words == "test error"
    (trained,) = [s for s in lab.short_answer([a, b]) if s.startswith("**Trained with.**")]
    assert "digit error dynamic 15.17%, random 17.50%" in trained and "test error" not in trained
    words = lab.table_words([a, b])
    assert "digit error, not the pair error its zoo card quotes" in words and "(100 minus it is the pair error)" in words
    alone = lab.table_words([row()])  # no pair model shown: nothing about pairs
    assert "pair" not in alone and "error: the share of the first 10,000 test images" in alone
    (said,) = [s for s in lab.report([a, replace(a, run_with="uniform", test_error=16.0)]).models["a"] if "instead" in s]
    assert "digit error 16.00% against 15.17%" in said


def test_one_iteration_of_dynamic_routing_is_named_so_in_the_table_and_the_details():
    from capsviz.registry import ONE_ITERATION

    cfg = replace(preset("capsnet-small"), routing_iterations=1)
    assert lab.trained_with(cfg) == "uniform"  # the same couplings: it is compared with uniform's row as its own
    assert lab.trained_label(cfg) == ONE_ITERATION  # the catalog's message, said in the reader's language where shown
    assert lab.trained_label(preset("capsnet-small")) == ""  # named by its routing
    own = row(model="one", trained="uniform", run="uniform", trained_label=ONE_ITERATION)
    label = own.trained
    assert label.startswith(ONE_ITERATION) and "stay uniform" in label and own.trained_short == ONE_ITERATION
    other = replace(own, run_with="dynamic", test_error=0.9)
    assert lab.table([own])[0]["trained with"] == label
    (said,) = [s for s in lab.report([own, other]).models["one"] if "instead" in s]
    assert f"(trained with {label}) run with **dynamic**" in said and "trained with uniform" not in said
    swapped = replace(own, run_with="random", test_error=0.6)
    (random,) = [s for s in lab.short_answer([own, swapped]) if s.startswith("**Random couplings.**")]
    assert f"instead of what it was trained with ({label})" in random


def test_the_entropy_chart_calls_100_uniform_couplings_not_no_routing():
    assert "100 = uniform" in lab.ENTROPY_TITLE and "no routing" not in lab.ENTROPY_TITLE


def test_the_shipped_seed_studys_sentences_are_longer_than_a_cut_name():
    from capsviz.text import MAX_CHARS

    (study,) = [s for s in lab.stored_studies() if s.shipped]
    assert max(len(line) for line in lab.seed_sentences(study)) > MAX_CHARS  # plain() would cut them: the page test checks they are whole


def test_the_two_tables_the_page_shows_hold_every_column_once_beside_the_rows_names():
    columns = list(lab.table([row()])[0])
    first, second = lab.SPLIT
    assert sorted(set(first) | set(second)) == sorted(columns)
    assert {"model", "run with"} <= set(first) & set(second)  # each row named in both
    assert len(first) <= 8 and len(second) <= 8  # what fits a laptop's width (tests/e2e/test_lab_layout_browser.py)


def pair_rows(digit: float, pairs: float, model="p", trained="dynamic", run="uniform"):
    """A model that reads MultiMNIST pairs, run with its own routing (digit error 15.00%, pair accuracy
    74.00%) and with `run` (the digit error and pair accuracy given)."""
    arch = "capsnet-small on multimnist"
    own = row(model=model, trained=trained, run=trained, err=15.0, arch=arch, pair_accuracy=74.0, n_pairs=10_000)
    return [own, replace(own, run_with=run, test_error=digit, pair_accuracy=pairs)]


DIGIT_BAND = rules.noise(15.0, 10_000, 15.0, 10_000)
PAIR_BAND = rules.noise(74.0, 10_000, 74.0, 10_000)


@pytest.mark.parametrize(
    "digit, pairs, by_pairs, by_digit",
    [
        (15.0 + 1.5 * DIGIT_BAND, 74.0 + 0.5 * PAIR_BAND, "within chance", "worse beyond chance"),  # the review's capsnet-small-multimnist
        (15.0 + 0.5 * DIGIT_BAND, 74.0 - 1.5 * PAIR_BAND, "worse beyond chance", "within chance"),  # the converse
        (15.0 + 1.5 * DIGIT_BAND, 74.0 - 1.5 * PAIR_BAND, "worse beyond chance", None),  # both agree: no note
    ],
)
def test_the_short_answer_judges_a_pair_model_by_its_pair_accuracy_and_says_where_the_digit_error_differs(digit, pairs, by_pairs, by_digit):
    rows = pair_rows(round(digit, 2), round(pairs, 2)) + [row(model="m"), row(model="m", run="uniform", err=0.5)]
    (uniform,) = [s for s in lab.short_answer(rows) if s.startswith("**Run without routing.**")]
    assert "for the 1 that read one image at a time, the test error is within chance on this model (**m** 0.50% against 0.50%)" in uniform
    assert (
        "for the 1 that read MultiMNIST pairs, judged by pair accuracy on 10,000 test pairs (the task it was trained for), "
        f"the pair accuracy is {by_pairs} on this model (**p** {pairs:.2f}% against 74.00%)." in uniform
    )
    note = f"By digit error alone (one digit in the frame), the verdict differs on **p**: {by_digit}, {digit:.2f}% against 15.00%."
    assert (note in uniform) == (by_digit is not None) and uniform.count("By digit error") == (by_digit is not None)
    alone = [s for s in lab.short_answer(pair_rows(round(digit, 2), round(pairs, 2))) if s.startswith("**Run without routing.**")]
    assert "judged by pair accuracy on 10,000 test pairs (the task it was trained for, reading MultiMNIST pairs), " in alone[0]
    assert "test error" not in alone[0]


@pytest.mark.parametrize("times, better", [(0.9, False), (1.1, True)])
def test_a_model_that_does_better_with_another_routing_than_its_own_is_said(times, better):
    band = rules.noise(2.0, 10_000, 2.0, 10_000)
    rows = [
        row(model="r", trained="random", run="random", err=2.0),
        row(model="r", trained="random", run="uniform", err=round(2.0 - times * band, 2)),
    ]
    (said,) = [s for s in lab.short_answer(rows) if s.startswith("**Better with another routing.**")]
    if better:
        assert f"**r** (trained with random) run with uniform: test error {2.0 - times * band:.2f}% against 2.00%" in said
    else:
        assert "No model does better beyond chance run with another routing than with its own" in said
    # a pair model: judged by its pairs; its digit error alone, saying better, is said beside them
    rows = pair_rows(round(15.0 - 1.5 * DIGIT_BAND, 2), round(74.0 + (times * PAIR_BAND), 2), trained="random")
    (said,) = [s for s in lab.short_answer(rows) if s.startswith("**Better with another routing.**")]
    pairs = f"{74.0 + times * PAIR_BAND:.2f}%"
    if better:
        assert (
            f"**p** (trained with random) run with uniform: pair accuracy {pairs} against 74.00%" in said and "By digit error" not in said
        )
    else:
        assert "No model does better" in said
        assert (
            "By digit error alone (one digit in the frame), **p** (trained with random) would look better: run with uniform, digit error "
            f"{15.0 - 1.5 * DIGIT_BAND:.2f}% against 15.00% but pair accuracy {pairs} against 74.00% (within chance)."
        ) in said
