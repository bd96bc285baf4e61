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
from capsviz.analysis.rule_words import guessing_words
from capsviz.analysis.zoo import card
from capsviz.config import DATASETS, MAX_SIZE, PRESETS
from capsviz.data import input_shape
from capsviz.data.upload import ZipLimits, receive_zip, uploads_dir
from capsviz.data.user import short_name, skipped_words
from capsviz.errors import CapsvizError
from capsviz.estimate import for_run, size_refusal
from capsviz.i18n import N_, gap, keeping, language, t, tn
from capsviz.text import MAX_SENTENCES, plain
from capsviz.train import TrainRun, default_decay_steps
from capsviz.viz import curves
from pages.classroom import SEATS, address, person
from pages.common import checkpoint_dir, public, require_router
from pages.drawn import live_chart
from pages.state import STATE
from pages.terms import term_help, uses

require_router()
uses("epoch", "seed", "digitcaps")  # the glossary entries its text names (pages.terms)
LIMITS = ZipLimits.from_env()  # the host's upload quotas (docs/class.md: Limits on a served class)

st.title(t("Train"))
st.markdown(
    t(
        "Train any model of either paper on this machine. Progress and curves update live; other pages "
        "stay usable. Every epoch leaves a checkpoint, **Stop** keeps a resumable one, and the finished "
        "model appears in the zoo and the sidebar. One run trains at a time: a run started while another "
        "trains waits in a queue and starts by itself. For long runs use the command line shown below."
    )
)

OWN = N_("your own images (zip)")  # the dataset choice's value; t(OWN) where shown
MIN_STEPS = 10  # steps per epoch below which a small dataset's run is said to learn little
owner, teacher = person()  # this student's runs: the same in each of their tabs and after a reload
allowed = access.may_train(checkpoint_dir(), teacher)
if not allowed:
    st.info(
        t(
            "On this server students explore the models: training and uploading pictures are off for now. The teacher can "
            "allow them (the sidebar's Class panel). Runs that train or wait are shown below."
        ),
        icon=":material/school:",
    )


def own_images(resize: int | None, model: str) -> tuple[str, int]:
    """The uploader for a zip of class folders and its summary; the dataset to train on
    (folder:PATH of the unpacked pictures) and its number of training images, or ("", 0) until
    a zip has been read, or while its pictures are too small for `model` (said, with the size that works)."""
    up = st.file_uploader(
        t("A zip of a folder with one subfolder of pictures (PNG, JPEG, BMP) per class, or train/ and test/ folders of them"),
        type=["zip"],
        key="t_zip",
        help=t(
            "At most {compressed} MB, {files} files and {total} MB unpacked",
            compressed=LIMITS.compressed >> 20,
            files=f"{LIMITS.files:,}",
            total=LIMITS.total >> 20,
        ),
    )
    if up is None:
        return "", 0
    try:
        with SEATS.away():  # a new zip is read and unpacked (seconds): the class's other page runs go on meanwhile
            s = receive_zip(up.getvalue(), uploads_dir(), LIMITS, resize, filename=up.name, owner=owner)
    except CapsvizError as e:
        st.error(plain(str(e)))
        return "", 0
    said = dict(
        name=plain(short_name(s.spec)),
        classes=len(s.classes),
        train=f"{sum(s.train_counts.values()):,}",
        test=f"{sum(s.test_counts.values()):,}",
        size=s.size,
    )
    st.markdown(
        tn(
            "**{name}**: **{n} class**, {train} training and {test} test images, {size}x{size} colour.",
            "**{name}**: **{n} classes**, {train} training and {test} test images, {size}x{size} colour.",
            len(s.classes),
            **said,
        )
        if s.channels == 3
        else tn(
            "**{name}**: **{n} class**, {train} training and {test} test images, {size}x{size} grey.",
            "**{name}**: **{n} classes**, {train} training and {test} test images, {size}x{size} grey.",
            len(s.classes),
            **said,
        )
    )
    st.dataframe(
        {t("class"): list(s.classes), t("training"): list(s.train_counts.values()), t("test"): list(s.test_counts.values())},
        hide_index=True,
    )
    for note in s.notes:
        st.caption(plain(note, limit=MAX_SENTENCES))
    if why := size_refusal(model, s.size, s.channels, len(s.classes)):
        st.error(plain(why))
        return "", 0
    if s.skipped:
        st.caption(t("Skipped: {skipped}", skipped=plain(skipped_words(s.skipped))))
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
    c1, c2, c3 = st.columns([1, 1.4, 1])  # the middle one holds the couplings' select, whose options are the longest words
    model = c1.selectbox(t("Model"), list(PRESETS), index=list(PRESETS).index("capsnet-small"), key="t_model")
    dataset = c1.selectbox(t("Dataset"), [*DATASETS, OWN], format_func=keeping(lambda d: t(OWN) if d == OWN else d), key="t_dataset")
    resize, own_count = None, 0
    if dataset == OWN and not allowed:
        c1.caption(t("Uploading your own pictures is off on this server for now."))
        dataset = ""
    elif dataset == OWN:
        resize = c1.number_input(t("Make images N x N (0 = their own size)"), 0, MAX_SIZE, 0, key="t_resize") or None
        dataset, own_count = own_images(resize, model)
    epochs = c2.number_input(t("Epochs"), 1, 200, 1, key="t_epochs")
    batch = c2.number_input(t("Batch size"), 1, 1024, 128, key="t_batch")
    iters = c2.number_input(t("Routing iterations"), 1, 10, 3, key="t_iters", help=term_help("iteration"))
    couplings = None
    if "couplings" in PRESETS[model].run_options:
        couplings = c2.selectbox(
            t("Couplings while training"),
            registry.vector_routings(),
            format_func=keeping(
                lambda c: (
                    t("{routing} (the iterations above)", routing=registry.routing_words(c))
                    if registry.ROUTINGS[c].iterative
                    else registry.routing_words(c)
                )
            ),
            key="t_couplings",
            help=t("How DigitCaps' couplings are made during training: the routing lab compares models trained each way.")
            + gap()
            + term_help("uniform", "random_couplings", "self_attention"),
        )
    decay = c2.number_input(
        t("Learning-rate decay: x0.96 every N steps"),
        10,
        100000,
        default_decay_steps(dataset),
        step=10,
        key=f"t_decay_{dataset}",
        help=t(
            "For runs of 20-30 epochs of the paper CapsNet on MNIST, 180 (about x0.9 per epoch) reached 0.38%, "
            "the default 0.45-0.5% (RESULTS.md)"
        ),
    )
    limit = c3.number_input(t("Training images (0 = all)"), 0, 60000, 0, step=1000, key="t_limit")
    seed = c3.number_input(
        t("Seed"),
        0,
        1_000_000,
        0,
        key="t_seed",
        help=t(
            "The starting weights, the order of the images and the augmentation. Train one model with several seeds to see "
            "how much of a difference is luck: the routing lab shows the spread when every routing has the same seeds."
        ),
    )
    recon = c3.checkbox(t("Reconstruction loss (CapsNet)"), True, key="t_recon", help=term_help("reconstruction"))
    precision = c3.selectbox(
        t("Precision"), ["fp32", "bf16"], key="t_precision", help=t("bf16 uses AMX on recent Intel CPUs and tensor cores on GPUs")
    )
    devices = {"auto": t("automatic"), "cpu": "CPU"}
    devices.update({"cuda": "CUDA"} if torch.cuda.is_available() else {})
    devices.update({"mps": "MPS"} if torch.backends.mps.is_available() else {})
    device = c3.selectbox(
        t("Device"),
        list(devices),
        format_func=devices.get,
        key="t_device",
        help=t("automatic picks a GPU when there is one"),
    )
    if own_count and own_count // int(batch) < MIN_STEPS:
        st.warning(
            t(
                "With {images} training images and batch {batch}, an epoch is {steps} step(s): too few to learn from. Try batch "
                "{better} and 10 or more epochs.",
                images=f"{own_count:,}",
                batch=int(batch),
                steps=max(own_count // int(batch), 1),
                better=max(own_count // MIN_STEPS, 1),
            ),
            icon=":material/tips_and_updates:",
        )
    name = st.text_input(
        t("Save as"),
        "my-capsnet",
        key="t_name",
        help=t("Saved to checkpoints/<name>.safetensors; the models that come with capsviz are kept"),
    )
    go = st.button(
        t("Start training"),
        disabled=busy or not allowed,
        type="primary",
        key="start_training",
        help=t("You have a run going or waiting; stop or cancel it first") if busy else None,
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


@st.cache_data(max_entries=64, show_spinner=t("Estimating the memory this run needs ..."))
def estimate_line(run: TrainRun, time_it: bool, lang: str) -> str:
    """The estimate's line in `lang`, the reader's language (kept for every session: keyed by it):
    memory always; time per epoch when asked, by a few real steps of this model at this batch on this
    machine. A refusal (will not fit, no data) raises, and is not kept."""
    return for_run(run, time_it=time_it).line()


if dataset:
    timed = STATE.t_timed.get() == run
    try:
        fits, line = True, estimate_line(run, timed, language())
    except CapsvizError as e:
        fits, line = False, str(e)
    (st.caption if fits else st.warning)(public(line))
    if fits and not timed and not busy:
        if st.button(
            t("Measure the time per epoch"), key="t_time", help=t("Runs two training steps of this model at this batch (a few seconds)")
        ):
            STATE.t_timed.set(run)
            st.rerun()
st.caption(
    t(
        "While it trains, the time per epoch is measured on the run itself, from the speed of its steps after the first "
        "{steps} (those build the model and warm the caches), and updated as it goes.",
        steps=jobs.WARMUP_STEPS,
    )
)
st.caption(
    t("Command line for the same run:")
    + gap()
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
            raise CapsvizError(t("Upload a zip of your images first."))
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
            raise CapsvizError(t("Training is off for students on this server."))
        access.claim(out.parent, out.stem, owner, teacher)
        queue.submit(run, out, owner, resume=resume, replace=replace, teacher=teacher, address=address())
    except PermissionError as e:
        st.error(plain(e))
        return
    except OSError as e:
        st.error(t("Cannot record who trains {model}: {why}", model=plain(out.stem), why=plain(e.strerror or e)))
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
        return t("a file capsviz cannot read")
    error = meta.metrics.test_error
    model = (meta.run or {}).get("model") or t("a model")
    guessing = card(meta).guessing
    said = (
        t("{model} trained here, saved {when}", model=model, when=when)
        if error is None
        else t("{model} trained here, saved {when}, test error {error}%", model=model, when=when, error=f"{error:.2f}")
    )
    return said + (f". {guessing}" if guessing else "")


def ask_before_start(pending: dict) -> None:
    """Start a pending run, unless it would replace a model trained earlier or wait behind another
    session's run: then ask first."""
    out = pending["out"]
    if out.exists() and not pending.get("replace"):
        whose = access.owners(out.parent).get(out.stem)
        said = dict(model=plain(out.stem), about=plain(about(out)))
        if whose == owner:
            exists = t(
                "**{model}** already exists: {about}. Training under this name replaces it once the new run has finished and "
                "been tested; until then the old model stays as it is.",
                **said,
            )
        elif whose:
            exists = t(
                "**{model}** already exists: {about}, trained by a student. Training under this name replaces it once the new "
                "run has finished and been tested; until then the old model stays as it is.",
                **said,
            )
        else:
            exists = t(
                "**{model}** already exists: {about}, the teacher's or shipped. Training under this name replaces it once the "
                "new run has finished and been tested; until then the old model stays as it is.",
                **said,
            )
        st.warning(exists)
        a, b = st.columns(2)
        if a.button(t("Replace {model}", model=plain(out.stem)), key="confirm_replace"):
            pending["replace"] = True
            st.rerun()
        if b.button(t("Keep it (change the name above)"), key="cancel_pending"):
            STATE.train_pending.pop()
            st.rerun()
        return
    others = queue.others(owner)
    if others and not pending.get("queue"):
        now = others[0].snapshot()
        said = dict(run=run_line(now), more=len(others) - 1, position=len(queue.waiting()) + 1)
        st.info(
            t(
                "Another student is training now ({run}), and {more} more run(s) wait. Runs train one at a time on this "
                "machine, so yours would wait in the queue (position {position}) and start by itself.",
                **said,
            )
            if len(others) > 1
            else t(
                "Another student is training now ({run}). Runs train one at a time on this machine, so yours would wait in the "
                "queue (position {position}) and start by itself.",
                **said,
            )
        )
        a, b = st.columns(2)
        if a.button(t("Queue my run"), key="queue_run", type="primary"):
            pending["queue"] = True
            st.rerun()
        if b.button(t("Watch the other run instead"), key="watch_other"):
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
        a.plotly_chart(live_chart(curves(s.curve, "loss", t("Training loss"))), key=f"{key}_loss_curve")
        b.plotly_chart(live_chart(curves(s.curve, "accuracy", t("Training accuracy (%)"))), key=f"{key}_acc_curve")
    classes = guesses(s.run)
    for e in s.evaluations:
        st.markdown(
            t(
                "epoch {epoch}: test error **{error}%** on {n} images",
                epoch=plain(e["epoch"]),
                error=f"{e['test_error']:.2f}",
                n=plain(e["n_test"]),
            )
        )
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
    st.subheader(t("Your run"))
    if s.state == "queued":
        st.info(
            t(
                "Queued, position {position}: your run starts by itself when the run(s) ahead of it finish. You can use the other "
                "pages meanwhile; it keeps its place.",
                position=s.position,
            )
        )
        if st.button(t("Leave the queue"), key="cancel_queued"):
            queue.cancel(job, owner)
            st.rerun()
        return
    draw(s, "own")
    if s.state == "running":
        if not s.stopping and st.button(t("Stop"), key="stop_training"):
            queue.cancel(job, owner)
            st.rerun()
    elif s.state == "finished":
        when = time.strftime("%H:%M UTC", time.gmtime(s.out.stat().st_mtime)) if s.out.exists() else "?"
        st.success(t("Finished: {message} at {when}. It is now in the zoo and the sidebar.", message=plain(public(s.message)), when=when))
    elif s.state == "stopped":
        kept = ckpt.latest_save(s.out)
        st.warning(
            t(
                "Stopped at step {step} of {total}. The checkpoint {checkpoint} keeps it; Resume continues exactly.",
                step=s.step,
                total=s.total,
                checkpoint=plain(kept.name),
            )
        )
        if st.button(t("Resume"), key="resume_training"):
            submit(s.run, s.out, resume=kept)
    elif s.state == "cancelled":
        st.info(t("Your run left the queue before it started. Nothing was trained or saved."))
    else:
        st.error(t("Training failed: {message}", message=plain(public(s.message))))


def others_runs() -> None:
    others = queue.others(owner)
    watched = STATE.train_watch.get(None)
    if watched is not None:
        job = next((j for j in others if j.id == watched), None)
        st.subheader(t("Another student's run"))
        if job is None:
            st.info(t("The run you were watching is over. Its model, if it finished, is in the zoo."))
            STATE.train_watch.pop()
            return
        s = job.snapshot()
        if s.state == "queued":
            st.info(t("It waits in the queue, position {position}.", position=s.position))
        else:
            draw(s, "watched")
        st.caption(t("Only the student who started a run can stop it."))
        if st.button(t("Stop watching"), key="stop_watching"):
            STATE.train_watch.pop()
            st.rerun()
        return
    if others and others[0].state == "queued":  # this session's run trains; these wait behind it
        n = len(others)
        st.info(
            tn(
                "{n} run of another student waits in the queue after yours.",
                "{n} runs of other students wait in the queue after yours.",
                n,
            )
        )
    elif others:
        now = run_line(others[0].snapshot())
        st.info(
            t("Another student is training now ({run}); {more} more run(s) wait.", run=now, more=len(others) - 1)
            if len(others) > 1
            else t("Another student is training now ({run}).", run=now)
        )
        if st.button(t("Watch it"), key="watch_running"):
            STATE.train_watch.set(others[0].id)
            st.rerun()


live = busy or drawn[2]


@st.fragment(run_every=1.0 if live else None)
def progress() -> None:
    job = queue.latest(owner)
    if job is None and not queue.others(owner):
        st.info(t("No training run yet. Choose a model and press **Start training**."))
    if job is not None:
        own_run(job)
    others_runs()
    if phase() != drawn:
        st.rerun()


progress()
