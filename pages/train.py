"""Train from the browser: the same engine and checkpoints as `python -m capsviz train`."""

import streamlit as st
import torch

from capsviz import jobs
from capsviz.config import PRESETS
from capsviz.devices import pick_device
from capsviz.errors import CapsvizError
from capsviz.train import TrainRun, default_decay_steps, model_config
from capsviz.viz import curves
from pages.common import checkpoint_dir, require_router

require_router()

st.title("Train")
st.markdown(
    "Train any model of either paper on this machine. Progress and curves update live; other pages "
    "stay usable. Every epoch leaves a checkpoint, **Stop** keeps a resumable one, and the finished "
    "model appears in the zoo and the sidebar. For long runs use the command line shown below."
)


@st.cache_data(show_spinner="Timing a training step ...")
def seconds_per_epoch(run: TrainRun) -> float:
    """One warmed-up training step of this run's model, batch, device and precision, scaled to an epoch."""
    from capsviz.bench import train_step_seconds
    from capsviz.models import build_model

    device = pick_device(run.device)
    model = build_model(model_config(run)).to(device)
    dt = train_step_seconds(model, run.batch_size, device, run.precision, steps=1, two_labels=run.dataset == "multimnist")
    n = run.train_limit or 60000
    return dt * n / run.batch_size


job = jobs.current()
snap = job.snapshot() if job else None
running = bool(snap and snap.state == "running")

with st.container(border=True):
    c1, c2, c3 = st.columns(3)
    model = c1.selectbox("Model", list(PRESETS), index=list(PRESETS).index("capsnet-small"), key="t_model")
    dataset = c1.selectbox("Dataset", ["mnist", "fashion-mnist", "multimnist", "affnist"], key="t_dataset")
    epochs = c2.number_input("Epochs", 1, 200, 1, key="t_epochs")
    batch = c2.number_input("Batch size", 1, 1024, 128, key="t_batch")
    iters = c2.number_input("Routing iterations", 1, 10, 3, key="t_iters")
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
    recon = c3.checkbox("Reconstruction loss (CapsNet)", True, key="t_recon")
    precision = c3.selectbox(
        "Precision", ["fp32", "bf16"], key="t_precision", help="bf16 uses AMX on recent Intel CPUs and tensor cores on GPUs"
    )
    devices = ["auto", "cpu"] + (["cuda"] if torch.cuda.is_available() else []) + (["mps"] if torch.backends.mps.is_available() else [])
    device = c3.selectbox("Device", devices, key="t_device", help="auto picks a GPU when there is one")
    name = st.text_input("Save as", "my-capsnet", key="t_name", help="Saved to checkpoints/<name>.safetensors")
    go = st.button("Start training", disabled=running, type="primary", key="start_training")

run = TrainRun(
    model=model,
    device=device,
    dataset=dataset,
    epochs=int(epochs),
    batch_size=int(batch),
    routing_iterations=int(iters) if PRESETS[model].family != "cnn" else None,
    reconstruction=recon if PRESETS[model].family == "capsnet" else None,
    precision=precision,
    decay_steps=int(decay),
    train_limit=int(limit) or None,
)
try:
    est = seconds_per_epoch(run)
    st.caption(f"Estimated time per epoch on this machine: about {est / 60:.1f} min ({est:.0f} s, from one timed step after a warm-up).")
except CapsvizError as e:
    st.error(str(e))
st.caption(
    "Command line for the same run: "
    + f"`python -m capsviz train --model {model} --dataset {dataset} --epochs {epochs} --batch-size {batch}"
    + (f" --routing-iterations {iters}" if run.routing_iterations else "")
    + (" --no-reconstruction" if run.reconstruction is False else "")
    + (f" --precision {precision}" if precision != "fp32" else "")
    + f" --decay-steps {decay}"
    + (f" --train-limit {limit}" if limit else "")
    + f" --out checkpoints/{name}.safetensors`"
)

if go:
    safe = "".join(ch for ch in name if ch.isalnum() or ch in "-_").strip("-_")
    if not safe:
        st.error("Give the model a name made of letters, digits, '-' or '_'.")
    else:
        try:
            jobs.start(run, checkpoint_dir() / f"{safe}.safetensors")
            st.rerun()
        except CapsvizError as e:
            st.error(str(e))


@st.fragment(run_every=1.0 if running else None)
def progress():
    job = jobs.current()
    if job is None:
        st.info("No training run yet on this server.")
        return
    s = job.snapshot()
    frac = s.step / s.total if s.total else 0.0
    speed = f" · {s.images_per_s:.0f} images/s · {s.eta_s / 60:.1f} min left" if s.images_per_s else ""
    st.progress(frac, text=f"{s.out.stem}: step {s.step}/{s.total}{speed}")
    if s.curve:
        a, b = st.columns(2)
        a.plotly_chart(curves(s.curve, "loss", "Training loss"), key="loss_curve")
        b.plotly_chart(curves(s.curve, "accuracy", "Training accuracy (%)"), key="acc_curve")
    for e in s.evaluations:
        st.markdown(f"epoch {e['epoch']}: test error **{e['test_error']:.2f}%** on {e['n_test']} images")
    if s.state == "running":
        if st.button("Stop", key="stop_training"):
            job.stop.set()
        st.session_state["was_running"] = True
        return
    if s.state == "finished":
        st.success(f"Finished: {s.message}. It is now in the zoo and the sidebar.")
    elif s.state == "stopped":
        st.warning(s.message)
        if st.button("Resume", key="resume_training"):
            jobs.start(s.run, s.out, resume=s.out)
            st.rerun()
    else:
        st.error(f"Training failed: {s.message}")
    if st.session_state.pop("was_running", False):
        st.rerun()  # full rerun: the sidebar and zoo pick up the new checkpoint, polling stops


progress()
