"""Everything the app keeps per browser session, declared once: each key's name, type, default,
what it is for and, where a link sets it, the link parameter and its bounds or choices. Pages read
and write the session through `STATE` (`STATE.image.get()`, `STATE.tour_step.set(2)`), and a
widget whose value the session keeps takes its key from it (`key=STATE.image.key`). The link a
session opened with is read once, here (`read_link`), and handed out a parameter at a time
(`link_asks`); pages.common brings each value within what the page shows, with a note
(capsviz.analysis.links). It uses Streamlit, so it lives in pages/, not capsviz/.

tests/test_state.py fails when a page uses a session key not declared here."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

import streamlit as st
from streamlit.errors import StreamlitAPIException

from capsviz.analysis import lab, stored
from capsviz.i18n import LANGUAGES, N_

_UNSET = object()


@dataclass(frozen=True)
class Key:
    """One key of st.session_state. `param`: the link parameter that sets it (a widget bound to
    the address has its key for name and parameter); `bounds` (lo, hi) or `choices`: what the
    link may ask for, where fixed (None: the page gives them, as the test set's size)."""

    name: str
    type: type | tuple[type, ...]
    default: object
    doc: str
    param: str | None = None
    bounds: tuple[float, float] | None = None
    choices: tuple | None = None

    @property
    def key(self) -> str:
        """The key as Streamlit wants it (a widget's key=)."""
        return self.name

    @property
    def present(self) -> bool:
        return self.name in st.session_state

    def get(self, default=_UNSET):
        """The session's value, else `default` (by default the declared one)."""
        if self.name in st.session_state:
            return st.session_state[self.name]
        return copy.copy(self.default) if default is _UNSET else default

    def set(self, value) -> None:
        st.session_state[self.name] = value

    def setdefault(self, value=_UNSET):
        """The session's value, after storing `value` (by default the declared one) where it has none."""
        if self.name not in st.session_state:
            st.session_state[self.name] = copy.copy(self.default) if value is _UNSET else value
        return st.session_state[self.name]

    def pop(self, default=None):
        return st.session_state.pop(self.name, default)


@dataclass(frozen=True)
class Keys:
    """A family of keys, one per `pattern`'s filling (the playground keeps each toy's settings
    apart: pg_dynamic_T and pg_em_T): `family(toy="em")` is its Key."""

    pattern: str  # str.format pattern
    type: type | tuple[type, ...]
    default: object
    doc: str
    param: str | None = None
    bounds: tuple[float, float] | None = None
    choices: tuple | None = None

    def __call__(self, **parts) -> Key:
        return Key(self.pattern.format(**parts), self.type, self.default, self.doc, self.param, self.bounds, self.choices)

    def matches(self, name: str) -> bool:
        """Whether `name` is one of this family's keys."""
        regex = re.sub(r"\\\{[a-z_]+\\\}", ".+", re.escape(self.pattern))
        return re.fullmatch(regex, name) is not None


ANY = object  # a value of any type (a Streamlit container, a dialog's numbers)
NUMBER = (int, float)
AFFINE = {"rotate": (-90, 90, 0), "scale": (0.5, 1.5, 1.0), "shear": (-0.6, 0.6, 0.0), "right": (-8, 8, 0), "down": (-8, 8, 0)}


class State:
    """Every key of the session (see the module's docstring). Names are Streamlit's keys and the
    address's parameters: renaming one breaks the links people have shared."""

    # --- who is asking (pages.common.person) and the link the session opened with
    session_id = Key("capsviz_session_id", str, "", "the identity minted for this session where the browser brought no signed one")
    asked = Key("asked", dict, {}, "questions this session answered or skipped: qid -> (round, choice or None)")
    projected_reveals = Key("projected_reveals", list, [], "questions the teacher revealed on the projector (pages.asking)")
    answer_pick = Keys("answer_{qid}", (str, type(None)), None, "a question's choice, before it is committed")
    answer_reason = Keys("reason_{qid}", str, "", "a question's optional one-line reason")
    id_cookie = Key(
        "capsviz_id_cookie", str, "", "the signed identity still to be put in the browser's cookie (pages.common.keep_identity)"
    )
    teacher = Key("capsviz_teacher", bool, False, "whether this session is the teacher's (read by the clear-cache guard)")
    teacher_key_typed = Key("teacher_key_typed", str, "", "the sidebar's teacher key field, emptied once tried")
    link_asked = Key("link_asked", dict, {}, "the link the session opened with: each parameter's values, handed out once")
    link_notes = Key("link_notes", dict, {}, "per parameter: (what the page says about the link, the value it shows)")
    link_model_seen = Key("link_model_seen", bool, False, "the link's ?model= has been looked at (first run only)")
    link_problem = Key("link_problem", tuple, (), "(the model a link asked for, why it cannot be used)")
    link_shown = Key("link_shown", str, "", "the model shown in place of the link's, while the warning shows")
    # --- the language (pages.language)
    language = Key(
        "lang", str, "en", "the language of every word the session is shown (the sidebar's switch)", param="lang", choices=tuple(LANGUAGES)
    )
    language_asked = Key("language_asked", str, "", "a language the link asked for that capsviz does not have, until noted")
    language_drawn = Key("language_drawn", str, "", "the language the session's widgets were last drawn in (pages.language)")
    # --- the active model (the sidebar)
    page_now = Key("page_now", str, "", "the page this run shows (a page change hands the test image on)")
    dataset_pick = Key("dataset_pick", str, "all datasets", "the sidebar's dataset filter")
    model_pick = Key("model_pick", str, "", "the sidebar's model: the active model's file name", param="model")
    pending_model = Key("pending_model", str, "", "a model a card or a button made active, applied by the sidebar")
    model_key = Key("model_key", str, "", "what keys the cached results of the model a page shows (pages.common.model_key)")
    site_slot = Key("site_slot", tuple, (), "(page, the sidebar's place for the static site's link)")
    long_results = Key("long_results", dict, {}, "results of the long computations run in this session, by their key")
    running = Keys("running:{label}", str, "", "the key of the long computation this button started, while it runs")
    # --- the test image (pages.common.pick_image)
    image = Key("image", int, 0, "the test image index widget", param="image")
    image_index = Key("image_index", int, 0, "the test image shown last, handed to the next page")
    image_pending = Key("image_pending", int, 0, "a test image to show next (a jump, Random, a page change)")
    jump_class = Key("jump_class", str, "-", "the 'jump to a test image of class' picker")
    # --- the pages' own settings; those with a param are bound to the address
    tour_step = Key("tour_step", int, 1, "the tour's step", param="step")
    squash = Key("squash", float, 1.0, "the zoo's squash slider: the length before squash", param="squash", bounds=(0.0, 5.0))
    capsule_index = Key("capsule", int, 0, "the explorer's (index) and the routing page's (class name) capsule", param="capsule")
    dims = Key("dims_from_url", ANY, None, "the explorer's 16 slider values to start from (the link's, else 0)", param="dims")
    dims_view = Key("dims_view", str, "", "the explorer's model, image and capsule the sliders were set for")
    iterations = Key("iterations", int, 3, "routing (1-10) or EM (1-5) iterations at inference", param="iterations", bounds=(1, 10))
    t = Key("t", int, 1, "the routing iteration drawn (up to the iterations)", param="t")
    layer = Key("layer", str, "convcaps1", "the EM page's convolutional capsule layer", param="layer", choices=("convcaps1", "convcaps2"))
    position = Key("position", int, 0, "the EM page's output position in that layer", param="position")
    zoom = Key("zoom", bool, False, "the EM page's zoom on the nearest votes", param="zoom", choices=(False, True))
    pair = Keys("pair_{part}", int, 0, "MultiMNIST's pair: i1, i2 (test indices), dy1, dx1, dy2, dx2 (shifts)", param="pair")
    pair_saved = Key("pair_saved", list, [], "MultiMNIST's pair, kept while another page shows")
    pair_pending = Key("pair_pending", list, [], "MultiMNIST's pair to show next (the link's, Random, Open)")
    mm_alone = Key(
        "mm_alone", str, "first digit", "MultiMNIST's digit routed alone", param="mm_alone", choices=("first digit", "second digit")
    )
    pairs_measured = Key("pairs_measured", int, 1000, "MultiMNIST's pairs measured", param="pairs_measured")
    cnn = Key("cnn", str, "", "the robustness page's baseline CNN (a file name)", param="cnn")
    tab = Key(
        "tab",
        str,
        N_("Affine transforms"),
        "the robustness page's tab",
        param="tab",
        choices=(N_("Affine transforms"), N_("Adversarial attacks")),
    )
    rotate = Key("rotate", int, 0, "degrees", param="rotate", bounds=AFFINE["rotate"][:2])
    scale = Key("scale", float, 1.0, "scale", param="scale", bounds=AFFINE["scale"][:2])
    shear = Key("shear", float, 0.0, "shear", param="shear", bounds=AFFINE["shear"][:2])
    right = Key("right", int, 0, "pixels right", param="right", bounds=AFFINE["right"][:2])
    down = Key("down", int, 0, "pixels down", param="down", bounds=AFFINE["down"][:2])
    affine_images = Key("affine_images", int, stored.AFFINE_IMAGES, "test images for the affine sweep", param="affine_images")
    attack = Key("attack", str, "fgsm", "the attack", param="attack", choices=("fgsm", "bim"))
    targeted = Key("targeted", bool, False, "whether the attack is targeted", param="targeted", choices=(False, True))
    attack_images = Key("attack_images", int, stored.ATTACK_IMAGES, "test images attacked", param="attack_images")
    epsilon = Key("epsilon", float, 0.1, "the attack's epsilon for the attacked images shown", param="epsilon")
    lab_models = Key("lab_models", list, [], "the lab's models (stems)", param="lab_models")
    lab_routings = Key("lab_routings", list, [], "the lab's routings", param="lab_routings")
    lab_test = Key("lab_test", int, lab.TEST_IMAGES, "the lab's test images", param="lab_test")
    lab_epsilon = Key("lab_epsilon", float, lab.FGSM_EPSILON, "the lab's FGSM epsilon", param="lab_epsilon")
    curves = Key("curves", str, "", "the reproduction page's dataset tab", param="curves")
    term = Key("term", str, "", "the glossary's search", param="term")
    # --- the Why capsules chapter (pages/why.py)
    why_change = Key("why_change", str, "shift", "the chapter's change of the digit", param="why_change", choices=("shift", "rotate"))
    why_shift = Key("why_shift", int, 4, "the chapter's shift (pixels right)", param="why_shift", bounds=(0, 4))
    why_angle = Key("why_angle", int, 30, "the chapter's turn (degrees, anticlockwise)", param="why_angle", bounds=(-30, 30))
    why_scheme = Key("why_scheme", str, "halves", "the chapter's parts moved", param="why_scheme", choices=("halves", "sides", "quadrants"))
    # --- projector mode (app.py): large text, full-width figures, no chrome a class does not need
    projector = Key("projector", bool, False, "projector mode: large text for a room", param="projector", choices=(False, True))
    page_terms = Key("page_terms", list, [], "the glossary entries this run's page used (pages.terms), linked under it")
    share_slot = Key("share_slot", ANY, None, "the place above the page for the view's address and QR code, filled after the page ran")
    # --- the playgrounds: each toy keeps its own settings
    pg_toy = Key("pg_toy", str, "dynamic", "which playground", param="toy", choices=("dynamic", "em"))
    pg_preset = Keys("pg_{toy}_preset", str, "", "the toy's preset", param="preset")
    pg_J = Keys("pg_{toy}_J", int, 2, "the toy's upper capsules", param="J", choices=(2, 3))
    pg_T = Keys("pg_{toy}_T", int, 3, "the toy's routing iterations", param="T", choices=(1, 2, 3, 4, 5))
    pg_cap = Keys("pg_{toy}_cap", int, 1, "the toy's lower capsule to move", param="cap", choices=(1, 2, 3, 4, 5, 6))
    pg_points = Keys("pg_{toy}_points", tuple, (), "the toy's (points, activations)", param="pts")
    pg_gen = Keys("pg_{toy}_gen", int, 0, "the toy's generation of point sliders (a preset starts a new one)")
    pg_rule = Key("pg_rule", str, "dynamic", "the dynamic toy's routing", param="rule", choices=("dynamic", "self-attention"))
    pg_asked_for = Key(
        "pg_asked_for", tuple, (), "the playground settings (toy, routing, preset, J, T, lower capsule) its question was asked for"
    )
    pg_question = Key("pg_question", ANY, None, "the playground's question for those settings (capsviz.analysis.questions)")
    pg_t = Key("pg_t", int, 1, "the toy's iteration drawn", param="t")
    # --- training (pages/train.py)
    t_timed = Key("t_timed", ANY, None, "the training settings whose time per epoch was measured")
    train_pending = Key("train_pending", dict, {}, "a run waiting for the user to confirm it replaces a model")
    train_watch = Key("train_watch", str, "", "the id of another session's run this one watches")


STATE = State()


def declared() -> list[Key | Keys]:
    """Every key and family of keys of the session."""
    return [v for v in vars(State).values() if isinstance(v, Key | Keys)]


def is_declared(name: str) -> bool:
    return any(k.name == name if isinstance(k, Key) else k.matches(name) for k in declared())


def read_link() -> None:
    """The link the session opened with, read once: each parameter with all its values (a
    multiselect's link repeats it: ?lab_models=a&lab_models=b)."""
    if not STATE.link_asked.present:
        STATE.link_asked.set({k: st.query_params.get_all(k) for k in st.query_params})


def link_asks(param: str) -> str | None:
    """The session's opening link's ?param= (its last value), handed once to the first page that asks, else None."""
    values = link_asks_all(param)
    return None if values is None else values[-1]


def link_asks_all(param: str) -> list[str] | None:
    """Every value the opening link gives ?param=, handed once, else None."""
    values = STATE.link_asked.get().pop(param, None) if STATE.link_asked.present else None
    return None if not values else [str(v) for v in values]


def view_params() -> dict[str, list[str]]:
    """The address's settings as the page has written them in this run: what a link to this very
    view holds (each parameter with all its values). Read after the page has run."""
    return {k: st.query_params.get_all(k) for k in st.query_params}


def choices_again(skip: str) -> None:
    """Every choice widget's value (text or a whole number: a select box's, a radio's) set again, so
    Streamlit sends it to the browser in the words of this run (pages.language, after a language
    switch); `skip`'s and a widget this run has drawn already are left as they are, and a button's
    state (True/False) is never set (Streamlit refuses it)."""
    for key in list(st.session_state.keys()):
        value = st.session_state[key]
        if key == skip or isinstance(value, bool) or not isinstance(value, str | int):
            continue
        try:
            st.session_state[key] = value
        except StreamlitAPIException:  # drawn earlier in this run (the sidebar's teacher key field)
            pass
