"""Train from the browser: the same engine and checkpoints as `python -m capsviz train`.

Runs go through the server's queue (capsviz/jobs.py): one trains at a time, each belongs to the
student who started it (capsviz.access: one browser, every tab of it, across reloads), and this
page shows a student their own run, or, when they ask, another student's progress (never that
run's errors, and no Stop for it). Who may train, and which names, is capsviz.access's to say.
"""

import time

import streamlit as st
import torch

from capsviz import access, jobs, registry
from capsviz import checkpoint as ckpt
from capsviz.analysis.rules import guessing_words
from capsviz.analysis.zoo import card
from capsviz.config import DATASETS, MAX_SIZE, PRESETS
from capsviz.data import input_shape
from capsviz.data.upload import ZipLimits, receive_zip, uploads_dir
from capsviz.data.user import short_name
from capsviz.errors import CapsvizError
from capsviz.estimate import for_run, size_refusal
from capsviz.glossary import help_text
from capsviz.text import MAX_SENTENCES, plain
from capsviz.train import TrainRun, default_decay_steps
from capsviz.viz import curves
from pages.common import address, checkpoint_dir, person, plain_chart, public, require_router
from pages.state import STATE

require_router()
LIMITS = ZipLimits.from_env()  # the host's upload quotas (docs/class.md: Limits on a served class)

st.title("Train")
st.markdown(
    "Train any model of either paper on this machine. Progress and curves update live; other pages "
    "stay usable. Every epoch leaves a checkpoint, **Stop** keeps a resumable one, and the finished "
    "model appears in the zoo and the sidebar. One run trains at a time: a run started while another "
    "trains waits in a queue and starts by itself. For long runs use the command line shown below."
)

OWN = "your own images (zip)"
MIN_STEPS = 10  # steps per epoch below which a small dataset's run is said to learn little
owner, teacher = person()  # this student's runs: the same in each of their tabs and after a reload
allowed = access.may_train(checkpoint_dir(), teacher)
if not allowed:
    st.info(
        "On this server students explore the models: training and uploading pictures are off for now. The teacher can "
        "allow them (the sidebar's Class panel). Runs that train or wait are shown below.",
        icon=":material/school:",
    )


def own_images(resize: int | None, model: str) -> tuple[str, int]:
    """The uploader for a zip of class folders and its summary; the dataset to train on
    (folder:PATH of the unpacked pictures) and its number of training images, or ("", 0) until
    a zip has been read, or while its pictures are too small for `model` (said, with the size that works)."""
    up = st.file_uploader(
        "A zip of a folder with one subfolder of pictures (PNG, JPEG, BMP) per class, or train/ and test/ folders of them",
        type=["zip"],
        key="t_zip",
        help=f"At most {LIMITS.compressed >> 20} MB, {LIMITS.files:,} files and {LIMITS.total >> 20} MB unpacked",
    )
    if up is None:
        return "", 0
    try:
        s = receive_zip(up.getvalue(), uploads_dir(), LIMITS, resize, filename=up.name, owner=owner)
    except CapsvizError as e:
        st.error(plain(str(e)))
        return "", 0
    kind = "colour" if s.channels == 3 else "grey"
    st.markdown(
        f"**{plain(short_name(s.spec))}**: **{len(s.classes)} classes**, {sum(s.train_counts.values()):,} training and {sum(s.test_counts.values()):,} test images, "
        f"{s.size}x{s.size} {kind}."
    )
    st.dataframe(
        {"class": list(s.classes), "training": list(s.train_counts.values()), "test": list(s.test_counts.values())}, hide_index=True
    )
    for note in s.notes:
        st.caption(plain(note, limit=MAX_SENTENCES))
    if why := size_refusal(model, s.size, s.channels, len(s.classes)):
        st.error(plain(why))
        return "", 0
    if s.skipped:
        st.caption("Skipped: " + ", ".join(f"{n:,} {plain(why)}" for why, n in s.skipped.items()))
    st.image([a for _, a in s.samples], caption=[plain(c) for c, _ in s.samples], width=64)
    return s.spec, sum(s.train_counts.values())


queue = jobs.queue()


def phase() -> tuple:
    """What the rest of the page depends on: when it changes, the whole page reruns (Start comes
    back, the sidebar and zoo list a new checkpoint, polling stops)."""
    own = queue.latest(owner)
    return (own.id if own else None, own.state if own else None, bool(queue.others(owner)))


drawn = phase()  # read once: the form, the polling and the check for a change all use this one state
busy = drawn[1] in jobs.ACTIVE

with st.container(border=True):
    c1, c2, c3 = st.columns(3)
    model = c1.selectbox("Model", list(PRESETS), index=list(PRESETS).index("capsnet-small"), key="t_model")
    dataset = c1.selectbox("Dataset", [*DATASETS, OWN], key="t_dataset")
    resize, own_count = None, 0
    if dataset == OWN and not allowed:
        c1.caption("Uploading your own pictures is off on this server for now.")
        dataset = ""
    elif dataset == OWN:
        resize = c1.number_input("Make images N x N (0 = their own size)", 0, MAX_SIZE, 0, key="t_resize") or None
        dataset, own_count = own_images(resize, model)
    epochs = c2.number_input("Epochs", 1, 200, 1, key="t_epochs")
    batch = c2.number_input("Batch size", 1, 1024, 128, key="t_batch")
    iters = c2.number_input("Routing iterations", 1, 10, 3, key="t_iters", help=help_text("iteration"))
    couplings = None
    if "couplings" in PRESETS[model].run_options:
        couplings = c2.selectbox(
            "Couplings while training",
            registry.vector_routings(),
            format_func=lambda c: registry.ROUTINGS[c].words + (" (the iterations above)" if registry.ROUTINGS[c].iterative else ""),
            key="t_couplings",
            help="How DigitCaps' couplings are made during training: the routing lab compares models trained each way. "
            + help_text("uniform", "random_couplings", "self_attention"),
        )
    decay = c2.number_input(
        "Learning-rate decay: x0.96 every N steps",
        10,
        100000,
        default_decay_steps(dataset),
        step=10,
        key=f"t_decay_{dataset}",
        help="For runs of 20-30 epochs of the paper CapsNet on MNIST, 180 (about x0.9 per epoch) reached 0.38%, "
        "the default 0.45-0.5% (RESULTS.md)",
    )
    limit = c3.number_input("Training images (0 = all)", 0, 60000, 0, step=1000, key="t_limit")
    seed = c3.number_input(
        "Seed",
        0,
        1_000_000,
        0,
        key="t_seed",
        help="The starting weights, the order of the images and the augmentation. Train one model with several seeds to see "
        "how much of a difference is luck: the routing lab shows the spread when every routing has the same seeds.",
    )
    recon = c3.checkbox("Reconstruction loss (CapsNet)", True, key="t_recon", help=help_text("reconstruction"))
    precision = c3.selectbox(
        "Precision", ["fp32", "bf16"], key="t_precision", help="bf16 uses AMX on recent Intel CPUs and tensor cores on GPUs"
    )
    devices = ["auto", "cpu"] + (["cuda"] if torch.cuda.is_available() else []) + (["mps"] if torch.backends.mps.is_available() else [])
    device = c3.selectbox("Device", devices, key="t_device", help="auto picks a GPU when there is one")
    if own_count and own_count // int(batch) < MIN_STEPS:
        st.warning(
            f"With {own_count:,} training images and batch {int(batch)}, an epoch is {max(own_count // int(batch), 1)} "
            f"step(s): too few to learn from. Try batch {max(own_count // MIN_STEPS, 1)} and 10 or more epochs.",
            icon=":material/tips_and_updates:",
        )
    name = st.text_input(
        "Save as", "my-capsnet", key="t_name", help="Saved to checkpoints/<name>.safetensors; the models that come with capsviz are kept"
    )
    go = st.button(
        "Start training",
        disabled=busy or not allowed,
        type="primary",
        key="start_training",
        help="You have a run going or waiting; stop or cancel it first" if busy else None,
    )

run = TrainRun(
    model=model,
    device=device,
    dataset=dataset or "mnist",
    resize=resize,
    epochs=int(epochs),
    batch_size=int(batch),
    routing_iterations=int(iters) if PRESETS[model].routing else None,
    couplings=None if couplings in (None, "dynamic") else couplings,
    seed=int(seed),
    reconstruction=recon if "reconstruction" in PRESETS[model].run_options else None,
    precision=precision,
    decay_steps=int(decay),
    train_limit=int(limit) or None,
)


@st.cache_data(max_entries=64, show_spinner="Estimating the memory this run needs ...")
def estimate_line(run: TrainRun, time_it: bool) -> str:
    """The estimate's line: memory always; time per epoch when asked, by a few real steps of this
    model at this batch on this machine. A refusal (will not fit, no data) raises, and is not kept."""
    return for_run(run, time_it=time_it).line()


if dataset:
    timed = STATE.t_timed.get() == run
    try:
        fits, line = True, estimate_line(run, timed)
    except CapsvizError as e:
        fits, line = False, str(e)
    (st.caption if fits else st.warning)(public(line))
    if fits and not timed and not busy:
        if st.button(
            "Measure the time per epoch", key="t_time", help="Runs two training steps of this model at this batch (a few seconds)"
        ):
            STATE.t_timed.set(run)
            st.rerun()
st.caption(
    "While it trains, the time per epoch is measured on the run itself, from the speed of its steps after the first "
    f"{jobs.WARMUP_STEPS} (those build the model and warm the caches), and updated as it goes."
)
st.caption(
    "Command line for the same run: "
    + f"`python -m capsviz train --model {plain(model, 'code')} --dataset {plain(short_name(dataset) if dataset else 'folder:PATH', 'code')} --epochs {epochs} --batch-size {batch}"
    + (f" --resize {resize}" if resize else "")
    + (f" --routing-iterations {iters}" if run.routing_iterations else "")
    + (" --no-reconstruction" if run.reconstruction is False else "")
    + (f" --couplings {run.couplings}" if run.couplings else "")
    + (f" --seed {run.seed}" if run.seed else "")
    + (f" --precision {precision}" if precision != "fp32" else "")
    + f" --decay-steps {decay}"
    + (f" --train-limit {limit}" if limit else "")
    + f" --out checkpoints/{plain(name, 'code')}.safetensors`"
)

if go and allowed:
    try:
        if not dataset:
            raise CapsvizError("Upload a zip of your images first.")
        st.caption(plain(for_run(run, time_it=False).line()))
        stem = jobs.model_name(name, checkpoint_dir())
        why = access.may_write(checkpoint_dir(), stem, owner, teacher)
        if why:
            raise CapsvizError(why)
        STATE.train_pending.set({"run": run, "out": checkpoint_dir() / f"{stem}.safetensors"})
    except CapsvizError as e:
        st.error(plain(str(e)))


def submit(run: TrainRun, out, resume=None, replace=False) -> None:
    """Hand a run to the queue, the model's name taken for this student first; a refusal (no
    data, a name in use or another's, a full queue, ...) is this student's alone."""
    STATE.train_pending.pop()
    try:
        if not access.may_train(checkpoint_dir(), teacher):
            raise CapsvizError("Training is off for students on this server.")
        access.claim(out.parent, out.stem, owner, teacher)
        queue.submit(run, out, owner, resume=resume, replace=replace, teacher=teacher, address=address())
    except PermissionError as e:
        st.error(plain(e))
        return
    except OSError as e:
        st.error(f"Cannot record who trains {plain(out.stem)}: {plain(e.strerror or e)}")
        return
    except CapsvizError as e:
        st.error(plain(public(e)))
        return
    STATE.train_watch.pop()
    st.rerun()


def run_line(s: jobs.Snapshot) -> str:
    """The run's progress line, its name made plain."""
    return jobs.progress_line(s, plain(s.out.stem))


def about(path) -> str:
    """A few words on an existing checkpoint, so that nobody replaces a model without knowing which."""
    try:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime))
        meta = ckpt.read_meta(path)
    except (CapsvizError, OSError):
        return "a file capsviz cannot read"
    error = meta.metrics.test_error
    model = (meta.run or {}).get("model", "a model")
    guessing = card(meta).guessing
    return (
        f"{model} trained here, saved {when}"
        + (f", test error {error:.2f}%" if error is not None else "")
        + (f". {guessing}" if guessing else "")
    )


def ask_before_start(pending: dict) -> None:
    """Start a pending run, unless it would replace a model trained earlier or wait behind another
    session's run: then ask first."""
    out = pending["out"]
    if out.exists() and not pending.get("replace"):
        whose = access.owners(out.parent).get(out.stem)
        st.warning(
            f"**{plain(out.stem)}** already exists: {plain(about(out))}"
            + ("" if whose == owner else ", trained by a student" if whose else ", the teacher's or shipped")
            + ". Training under this name replaces it once the new run has finished and been tested; until then the old model stays as it is."
        )
        a, b = st.columns(2)
        if a.button(f"Replace {plain(out.stem)}", key="confirm_replace"):
            pending["replace"] = True
            st.rerun()
        if b.button("Keep it (change the name above)", key="cancel_pending"):
            STATE.train_pending.pop()
            st.rerun()
        return
    others = queue.others(owner)
    if others and not pending.get("queue"):
        now = others[0].snapshot()
        st.info(
            f"Another student is training now ({run_line(now)})"
            + (f", and {len(others) - 1} more run(s) wait" if len(others) > 1 else "")
            + ". Runs train one at a time on this machine, so yours would wait in the queue "
            f"(position {len(queue.waiting()) + 1}) and start by itself."
        )
        a, b = st.columns(2)
        if a.button("Queue my run", key="queue_run", type="primary"):
            pending["queue"] = True
            st.rerun()
        if b.button("Watch the other run instead", key="watch_other"):
            STATE.train_pending.pop()
            STATE.train_watch.set(others[0].id)
            st.rerun()
        return
    submit(pending["run"], out, replace=bool(pending.get("replace")))


pending = STATE.train_pending.get(None)
if pending:
    ask_before_start(pending)


def draw(s: jobs.Snapshot, key: str) -> None:
    """Progress bar, curves and test errors of one run."""
    st.progress(s.step / s.total if s.total else 0.0, text=run_line(s))
    if s.curve:
        a, b = st.columns(2)
        a.plotly_chart(plain_chart(curves(s.curve, "loss", "Training loss")), key=f"{key}_loss_curve")
        b.plotly_chart(plain_chart(curves(s.curve, "accuracy", "Training accuracy (%)")), key=f"{key}_acc_curve")
    classes = guesses(s.run)
    for e in s.evaluations:
        st.markdown(f"epoch {plain(e['epoch'])}: test error **{e['test_error']:.2f}%** on {plain(e['n_test'])} images")
        if classes is not None:
            st.caption(guessing_words(e["test_error"], int(e["n_test"]), *classes))  # plain: numbers only


def guesses(run: TrainRun) -> tuple[int, int] | None:
    """(classes, labels per image) of a run's dataset, for its errors against guessing; None when its
    images are gone (a user's upload removed)."""
    try:
        shape = input_shape(run.dataset, run.resize)
    except (CapsvizError, OSError):
        return None
    return shape.num_classes, shape.labels


def own_run(job: jobs.TrainJob) -> None:
    s = job.snapshot()
    st.subheader("Your run")
    if s.state == "queued":
        st.info(
            f"Queued, position {s.position}: your run starts by itself when the run(s) ahead of it finish. "
            "You can use the other pages meanwhile; it keeps its place."
        )
        if st.button("Leave the queue", key="cancel_queued"):
            queue.cancel(job, owner)
            st.rerun()
        return
    draw(s, "own")
    if s.state == "running":
        if not s.stopping and st.button("Stop", key="stop_training"):
            queue.cancel(job, owner)
            st.rerun()
    elif s.state == "finished":
        when = time.strftime("%H:%M UTC", time.gmtime(s.out.stat().st_mtime)) if s.out.exists() else "?"
        st.success(f"Finished: {plain(public(s.message))} at {when}. It is now in the zoo and the sidebar.")
    elif s.state == "stopped":
        kept = ckpt.latest_save(s.out)
        st.warning(f"Stopped at step {s.step} of {s.total}. The checkpoint {plain(kept.name)} keeps it; Resume continues exactly.")
        if st.button("Resume", key="resume_training"):
            submit(s.run, s.out, resume=kept)
    elif s.state == "cancelled":
        st.info("Your run left the queue before it started. Nothing was trained or saved.")
    else:
        st.error(f"Training failed: {plain(public(s.message))}")


def others_runs() -> None:
    others = queue.others(owner)
    watched = STATE.train_watch.get(None)
    if watched is not None:
        job = next((j for j in others if j.id == watched), None)
        st.subheader("Another student's run")
        if job is None:
            st.info("The run you were watching is over. Its model, if it finished, is in the zoo.")
            STATE.train_watch.pop()
            return
        s = job.snapshot()
        if s.state == "queued":
            st.info(f"It waits in the queue, position {s.position}.")
        else:
            draw(s, "watched")
        st.caption("Only the student who started a run can stop it.")
        if st.button("Stop watching", key="stop_watching"):
            STATE.train_watch.pop()
            st.rerun()
        return
    if others and others[0].state == "queued":  # this session's run trains; these wait behind it
        n = len(others)
        who = "1 run of another student waits" if n == 1 else f"{n} runs of other students wait"
        st.info(f"{plain(who)} in the queue after yours.")
    elif others:
        st.info(
            f"Another student is training now ({run_line(others[0].snapshot())})"
            + (f"; {len(others) - 1} more run(s) wait." if len(others) > 1 else ".")
        )
        if st.button("Watch it", key="watch_running"):
            STATE.train_watch.set(others[0].id)
            st.rerun()


live = busy or drawn[2]


@st.fragment(run_every=1.0 if live else None)
def progress() -> None:
    job = queue.latest(owner)
    if job is None and not queue.others(owner):
        st.info("No training run yet. Choose a model and press **Start training**.")
    if job is not None:
        own_run(job)
    others_runs()
    if phase() != drawn:
        st.rerun()


progress()
