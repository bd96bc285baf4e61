"""A view's address as a QR code, so a class opens exactly what the teacher projects.

segno (pure Python, no dependencies) draws the code; where it is not installed the pages show the
address alone."""

from __future__ import annotations

import io
from urllib.parse import urlencode, urlsplit, urlunsplit

try:
    import segno
except ImportError:  # an older install: the address alone still works
    segno = None

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def view_address(base: str | None, page: str, params: dict) -> str:
    """The address of `page` with the view's settings `params` (each a value or a list of them):
    on the app at `base` (its address in the browser, with or without the page), else a path from
    the root."""
    root = (base or "").rstrip("/")
    if page and root.endswith(f"/{page}"):  # a browser's address may still name the page it shows
        root = root[: -len(page) - 1]
    query = urlencode({k: v for k, v in sorted(params.items())}, doseq=True)
    return f"{root}/{page}" + (f"?{query}" if query else "")


def local_only(address: str) -> bool:
    """Whether `address` names this computer alone (localhost): a student's phone cannot open it."""
    host = urlsplit(address).hostname
    return host is None or host in LOCAL_HOSTS


def reachable(address: str, listening: str | None, network: str | None) -> str:
    """`address` as a phone on the network opens it: where it names this computer alone (the
    teacher's browser on the server itself) and the server listens on every interface
    (`listening`, Streamlit's server.address: unset, 0.0.0.0 or ::), the machine's address on the
    network (`network`) in its place; else `address` as it is."""
    parts = urlsplit(address)
    if (
        not parts.hostname
        or not local_only(address)
        or not network
        or network in LOCAL_HOSTS
        or (listening or "") not in ("", "0.0.0.0", "::")
    ):
        return address
    host = f"[{network}]" if ":" in network else network
    return urlunsplit(parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")))


def qr_png(address: str, scale: int = 6) -> bytes | None:
    """The QR code of `address` as PNG bytes (error correction M: a projected code read from the
    back of a room survives a little blur), or None without segno."""
    if segno is None:
        return None
    out = io.BytesIO()
    segno.make(address, error="m", micro=False).save(out, kind="png", scale=scale, border=2)
    return out.getvalue()
