"""Links from the app to the static site's view of the same model and image (`CAPSVIZ_SITE_URL`).

Kept apart from the export so the app imports no ONNX code to draw a link."""

from __future__ import annotations

import os
from urllib.parse import urlencode

from capsviz.i18n import SOURCE, language
from capsviz.registry import FAMILIES

SITE_ENV = "CAPSVIZ_SITE_URL"
VIEWS = {"explorer": "explore", "routing": "routing", "tour": "tour", "playground": "playground", "why": "why"}  # app page -> site view
# The query parameters both share, with the same meaning
SHARED = (
    "model",
    "image",
    "capsule",
    "dims",
    "iterations",
    "t",
    "step",
    "preset",
    "J",
    "T",
    "cap",
    "rule",
    "why_change",
    "why_shift",
    "why_angle",
)


def runs_in_site(config) -> bool:
    """Whether the site can run a model of this config: one with a decoder whose family's entry
    names its site export (capsviz.entries.Family.site: a CapsNet or an Efficient-CapsNet; not
    matrix capsules, not the CNNs)."""
    entry = FAMILIES.get(getattr(config, "family", None))
    return bool(config.decodes) and entry is not None and entry.site is not None


def site_link(page: str, query: dict, runs_in_site: bool, base: str | None = None) -> str | None:
    """The site's address of the view the app shows on `page` with `query` (the app's query
    parameters), or None: no site configured (`$CAPSVIZ_SITE_URL`), a page the site does not have,
    or a model it cannot run (`runs_in_site`: a CapsNet or Efficient-CapsNet with a decoder; the
    playground needs no model). A student reading the app in Chinese or Japanese gets the site's
    link with lang=, so the site speaks the same language."""
    base = base if base is not None else os.environ.get(SITE_ENV, "")
    if not base or page not in VIEWS or (page != "playground" and not runs_in_site):
        return None
    if page == "playground" and query.get("toy", "dynamic") != "dynamic":  # the site's playground is routing by agreement's
        return None
    params = {"view": VIEWS[page], **{k: str(query[k]) for k in SHARED if k in query and str(query[k])}}
    if page == "routing":  # the app's routing page runs dynamic routing for every model (Efficient-CapsNet's capsules too)
        params["routing"] = "dynamic"
    if language() != SOURCE:  # the site opens in the language the student reads the app in
        params["lang"] = language()
    return f"{base.split('?')[0].rstrip('/')}/?{urlencode(params)}"


def site_tour_step(step: int, chapter: int, walk: int) -> int | None:
    """The site's tour step for the app's tour `step`: the app's tour opens with `chapter` steps of
    the Why capsules chapter that the site's tour does not have, then the `walk` steps both share,
    then "Where I stand". None where the site has no such step (its tour then opens at the start)."""
    k = step - chapter
    return k if 1 <= k <= walk else None
