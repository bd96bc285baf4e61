"""Projector mode: a page a teacher shows to a room. Text at least 20 px at 1920x1080, figures at
the page's full width and drawn with large text (capsviz.viz.why.BIG), and none of the Streamlit
chrome a class does not need (the toolbar, its menu and Deploy button). A sidebar switch turns it
on, and so does `projector=1` in the address, which the switch keeps while it is on: the link a
teacher shares opens as the teacher shows it."""

import streamlit as st

from capsviz.i18n import t
from capsviz.viz.share import local_only, qr_png, reachable, view_address
from pages.state import STATE, link_asks, view_params

ON = ("1", "true", "yes", "on")
# Streamlit's text is 16 px (1rem); 22 px reads from the back of a classroom on a 1920x1080 projector.
CSS = """
<style>
html { font-size: 22px; }
[data-testid="stMain"] p, [data-testid="stMain"] li, [data-testid="stMain"] label,
[data-testid="stMain"] [data-testid="stCaptionContainer"], [data-testid="stMain"] [data-testid="stImageCaption"],
[data-testid="stSidebar"] p, [data-testid="stSidebar"] label, [data-testid="stSliderThumbValue"],
[data-testid="stSliderTickBarMin"], [data-testid="stSliderTickBarMax"],
[data-testid="stMain"] [data-testid="stTable"] th, [data-testid="stMain"] [data-testid="stTable"] td { font-size: 22px !important; line-height: 1.45; }
[data-testid="stMain"] [data-testid="stMetricValue"] p, [data-testid="stMain"] [data-testid="stMetricValue"] div { font-size: 56px !important; }
[data-testid="stMain"] .block-container { max-width: 100% !important; padding-left: 2.5rem; padding-right: 2.5rem; }
[data-testid="stToolbar"], [data-testid="stDecoration"], [data-testid="stAppDeployButton"], [data-testid="stMainMenu"] { display: none !important; }
</style>
"""


def projector_switch() -> bool:
    """The sidebar's projector switch (set once from the opening link's ?projector=), the address
    kept in step with it and, while it is on, the page's styles for a room. Returns whether it is on."""
    if not STATE.projector.present:
        asked = link_asks(STATE.projector.param)
        STATE.projector.set(asked is not None and asked.strip().lower() in ON)
    with st.sidebar:
        st.toggle(
            t("Projector mode"),
            key=STATE.projector.key,
            help=t("Large text and full-width figures for a room, without the menus a class does not need."),
        )
    on = bool(STATE.projector.get())
    if on:
        st.query_params[STATE.projector.param] = "1"
        st.html(CSS)
        STATE.share_slot.set(st.empty())  # above the page, filled by `share_view` once the page has written its view
    else:
        st.query_params.pop(STATE.projector.param, None)
    return on


def big() -> bool:
    """Whether this run draws for a projector (the figures' large text and single column)."""
    return bool(STATE.projector.get())


@st.cache_resource(show_spinner=False)
def _network() -> str | None:
    """This machine's address on its network, as Streamlit prints it ("Network URL")."""
    from streamlit import net_util

    return net_util.get_internal_ip()


@st.cache_data(max_entries=256, show_spinner=False)
def _qr(address: str) -> bytes | None:
    return qr_png(address, scale=8)  # about 400 px: scanned from a few metres off the projected page


def share_view(page: str) -> None:
    """In projector mode, after the page ran: the address of exactly this view (page, model,
    image, settings) and its QR code above the page, folded until the teacher opens it, for
    students to open on their phones."""
    slot = STATE.share_slot.pop()
    if not big() or slot is None or page == "teacher":  # the Teacher page is no view for a student's phone
        return
    address = reachable(view_address(st.context.url, page, view_params()), st.get_option("server.address"), _network())
    with slot.container(), st.expander(t("Open this view on your phone: its address and QR code")):
        left, right = st.columns([1, 2])
        png = _qr(address)
        if png is not None:
            left.image(png, output_format="PNG")  # at its own size: no resampling blurs a module
        right.code(address, language=None, wrap_lines=True)
        if local_only(address):
            right.caption(
                t(
                    "This address names this computer only: students need the server's address on the network (the "
                    "one `capsviz app --server.address 0.0.0.0` prints)."
                )
            )
