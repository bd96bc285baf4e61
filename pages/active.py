"""The active model and its test images: the checkpoints on this server, loaded once per process for
every session, the page's model (or a stand-in that fits), and results kept for every session."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import streamlit as st
import torch

from capsviz.analysis import predict
from capsviz.checkpoint import list_checkpoints
from capsviz.config import user_dataset
from capsviz.data import model_test_set
from capsviz.data.user import short_name
from capsviz.errors import CapsvizError
from capsviz.i18n import N_, gap, language, speaking, t
from capsviz.model_cache import ModelCache
from capsviz.registry import family_words
from capsviz.schema import CheckpointMeta
from capsviz.text import plain
from pages.common import checkpoint_dir, public
from pages.state import STATE

ALL = N_("all datasets")  # the dataset filter's first choice (a value, translated where shown)


def checkpoints() -> list[tuple[Path, CheckpointMeta]]:
    """Readable checkpoints in checkpoints/ (fresh every run: a model trained in this session shows up
    at once), MNIST models first: the first is the default active model, and MNIST is where a newcomer starts."""
    found = [(p, m) for p, m in list_checkpoints(checkpoint_dir()) if isinstance(m, CheckpointMeta)]
    return sorted(found, key=lambda pm: (pm[1].dataset != "mnist", pm[0].name))


@st.cache_resource(show_spinner=False)
def models() -> ModelCache:
    """The server's one cache of loaded models, shared by every session (capsviz.model_cache)."""
    return ModelCache()


def load_model(path: Path):
    """(model, meta) of a checkpoint, loaded once per version of the file for every session."""
    torch.set_grad_enabled(False)  # this session's thread: pages only infer
    cache = models()
    if cache.holds(path):
        return cache.get(path)
    with st.spinner(t("Loading model ...")):
        return cache.get(path)


def model_key(path: Path) -> str:
    """What keys a page's cached results for the model in `path`: a retrained file is a new model."""
    return f"{path}:{path.stat().st_mtime}"


_FOR_IMAGE: dict[str, object] = {}  # the core functions `for_image` has been asked for, by name


@st.cache_data(max_entries=512, show_spinner=False)
def _for_image(name: str, key: str, lang: str, _model, image_bytes: bytes, shape: tuple, args: tuple):  # _model: the one `key` names
    with speaking(lang):  # the words a result holds are in the language it is kept for
        return _FOR_IMAGE[name](_model, np.frombuffer(image_bytes, np.float32).reshape(shape), *args)


def for_image(fn, model, image: np.ndarray, *args, key: str | None = None):
    """fn(model, image, *args) for a core function `fn` (capsviz.analysis: a prediction, a routing
    trace, a tour, a segmentation), computed once for every session that asks for it with this
    model and this image: a class following one link asks for the same ones. `key` names the model
    (`model_key`; by default the page's active model); `args` must be hashable. A result is kept
    per language too: the words it holds are the session's."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    _FOR_IMAGE.setdefault(name, fn)
    image = np.asarray(image, np.float32)
    return _for_image(name, key or STATE.model_key.get(), language(), model, image.tobytes(), image.shape, args)


def answer(key: str, model, image: np.ndarray):
    """The model's answer for an image (capsviz.analysis.predict), cached as `for_image` caches."""
    return for_image(predict, model, image, key=key)


def active_name() -> str | None:
    """The active checkpoint's file name: the sidebar's pick, else the link's ?model=, else the first
    (among the models of the dataset chosen in the sidebar)."""
    dataset = STATE.dataset_pick.get()
    names = [p.name for p, m in checkpoints() if dataset == ALL or m.dataset == dataset]
    for cand in (STATE.pending_model.get(None), STATE.model_pick.get(None), st.query_params.get("model")):
        if cand in names:
            return cand
    return names[0] if names else None


def active_model():
    """(model, meta, path) for the active model, or None after telling the user why."""
    name = active_name()
    if name is None:
        st.info(
            t(
                "No model is available yet. Train one on the **Train** page, or from a terminal: "
                "`python -m capsviz train --model capsnet-small --out checkpoints/capsnet-small.safetensors`."
            )
        )
        return None
    st.query_params["model"] = name
    path = str(checkpoint_dir() / name)
    try:
        model, meta = load_model(Path(path))
        STATE.model_key.set(model_key(Path(path)))
    except (CapsvizError, OSError) as e:
        st.error(t("Cannot load {name}: {why}", name=plain(Path(path).name), why=plain(public(e))))
        return None
    return model, meta, Path(path)


def page_model(fits, needs: str, why: str, choose=None):
    """(model, meta, path) for this page: the active model when `fits(meta)`; else a model from the
    folder that fits (the same dataset's first, or `choose(meta, suitable)`'s pick, which returns
    ((path, meta), a sentence on why)), named at the top of the page with a button to make
    it the active model everywhere; else the page explains `why` ({name} and {family} filled in)
    and stops ({family}: `family_words`). `needs` says in a few words what the page needs."""
    loaded = active_model()
    if loaded is None:
        st.stop()
    model, meta, path = loaded
    if fits(meta):
        return loaded
    suitable = sorted(((p, m) for p, m in checkpoints() if fits(m)), key=lambda pm: (pm[1].dataset != meta.dataset, pm[0].name))
    if not suitable:
        st.info(why.format(name=plain(path.stem), family=family_words(meta.family)))  # plain: the name is made plain
        st.stop()
    (stand, stand_meta), picked = suitable[0], ""
    if choose is not None:
        (stand, stand_meta), picked = choose(meta, suitable)
    try:
        model, meta2 = load_model(stand)
    except (CapsvizError, OSError) as e:
        st.error(t("Cannot load {name}: {why}", name=plain(stand.name), why=plain(public(e))))
        st.stop()
    words = dict(name=plain(path.stem), family=family_words(meta.family), needs=needs, shown=plain(stand.stem))
    if stand_meta.dataset == meta.dataset:
        said = t("**{name}**, the model in the sidebar, is {family}; this page needs {needs}, so it shows **{shown}**.", **words)
    else:
        said = t(
            "**{name}**, the model in the sidebar, is {family}; this page needs {needs}, so it shows **{shown}** (trained on {dataset}).",
            dataset=plain(stand_meta.dataset),
            **words,
        )
    st.info(said + (gap() + plain(picked) if picked else ""), icon=":material/swap_horiz:")
    if st.button(t("Use {name} on every page", name=plain(stand.stem)), key=f"switch_{stand.stem}"):
        STATE.pending_model.set(stand.name)  # the sidebar switches its dataset filter if needed
        st.rerun()
    STATE.model_key.set(model_key(stand))  # traces are cached per model shown
    return model, meta2, stand


_TEST_SETS_READ: set[tuple] = set()  # the test sets this process has read (a spinner says so while one is read)


@st.cache_resource(show_spinner=False)
def _test_set(dataset: str, size: int | None, channels: int, where: str | None):  # `where` keys the cache by data folder
    return model_test_set(dataset, size, channels)


def test_set(dataset: str, size: int | None = None, channels: int = 1, quiet: bool = False):
    """The test split a model of size x size inputs with `channels` channels was tested on (a
    user's images read at that size: capsviz.data.model_test_set), or None after showing
    exactly how to get it (`quiet`: without, where the page has said so once already)."""
    asked = (dataset, size, channels, os.environ.get("CAPSVIZ_DATA_DIR"))
    try:
        if asked in _TEST_SETS_READ:
            return _test_set(*asked)
        with st.spinner(t("Loading test images ...")):  # the server's first read of this test set
            found = _test_set(*asked)
        _TEST_SETS_READ.add(asked)
        return found
    except CapsvizError as e:
        if quiet:
            return None
        if user_dataset(dataset):
            name = short_name(dataset)
            why = str(e).replace(dataset, name).replace(user_dataset(dataset)[1], name)  # the server's paths are its own
            st.warning(
                t(
                    "The images this model was trained on ({name}) are not available on this server, so this page can only "
                    "use a picture you upload or draw. ({why}.)",
                    name=plain(name),
                    why=plain(why),
                ),
                icon=":material/image_not_supported:",
            )
            return None
        st.warning(t("The {dataset} test images are not available, so this page can only use uploaded images.", dataset=plain(dataset)))
        with st.expander(t("How to get the data"), expanded=True):
            st.code(str(e), language=None, wrap_lines=True)
            st.markdown(
                t("Run `python -m capsviz data --download`, or set `CAPSVIZ_DATA_DIR` to a folder with the IDX files, then reload.")
            )
        return None
