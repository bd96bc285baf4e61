"""Your own images, as a new user would bring them: a zip of colour pictures in class folders is
uploaded on the Train page, summarised, trained on from the browser, and the model it makes opens
on the pages with its class names and colour reconstructions."""

import io
import re
import zipfile

import numpy as np
import pytest
from PIL import Image, ImageDraw
from playwright.sync_api import expect
from st_helpers import wait_for_app_run
from test_browser import no_exceptions, open_page, shot

pytestmark = pytest.mark.e2e

CLASSES = ("circle", "square", "stripes")
COLOURS = {"circle": (220, 40, 40), "square": (40, 180, 60), "stripes": (40, 80, 220)}


def picture(kind: str, rng) -> Image.Image:
    """A 32x32 colour picture of `kind`, moved and sized at random, on a noisy background."""
    bg = (rng.random((32, 32, 3)) * 60).astype(np.uint8)
    img = Image.fromarray(bg, "RGB")
    d = ImageDraw.Draw(img)
    x, y, r = rng.integers(10, 22), rng.integers(10, 22), rng.integers(5, 9)
    colour = COLOURS[kind]
    if kind == "circle":
        d.ellipse([x - r, y - r, x + r, y + r], fill=colour)
    elif kind == "square":
        d.rectangle([x - r, y - r, x + r, y + r], fill=colour)
    else:
        for k in range(0, 32, 6):
            d.line([(0, k + x % 6), (31, k + x % 6)], fill=colour, width=2)
    return img


def shapes_zip(n_per_class: int = 40) -> bytes:
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for kind in CLASSES:
            for i in range(n_per_class):
                png = io.BytesIO()
                picture(kind, rng).save(png, "PNG")
                z.writestr(f"shapes/{kind}/{i:03d}.png", png.getvalue())
        z.writestr("shapes/notes.txt", "not a picture")
    return buf.getvalue()


def test_a_zip_of_colour_pictures_is_trained_on_and_explored_from_the_browser(page, own_server, shots, tmp_path):
    path = tmp_path / "shapes.zip"
    path.write_bytes(shapes_zip())
    page.set_default_timeout(120_000)
    open_page(page, own_server["url"] + "/train", "Train")
    page.get_by_label("Dataset", exact=True).click()
    page.get_by_role("option", name="your own images (zip)").click()
    wait_for_app_run(page)
    page.locator("input[type=file]").set_input_files(str(path))
    expect(page.get_by_text(re.compile(r"3 classes"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"32x32 colour"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"1 not a picture|not a picture"))).to_be_visible()  # the .txt, skipped and counted
    wait_for_app_run(page)
    shot(page, shots, "own_images_summary")
    name = page.get_by_label("Save as", exact=True).and_(page.get_by_test_id("stTextInputField"))
    name.fill("shapes")
    page.get_by_role("button", name="Start training").click()
    expect(page.get_by_text(re.compile(r"test error", re.I)).first).to_be_visible(timeout=300_000)
    wait_for_app_run(page)
    shot(page, shots, "own_images_trained")
    no_exceptions(page)
    assert (own_server["checkpoints"] / "shapes.safetensors").is_file()

    for where in ("explorer", "routing", "lab", "zoo"):
        open_page(page, own_server["url"] + f"/{where}?model=shapes.safetensors", None)
        wait_for_app_run(page)
        expect(page.get_by_text(re.compile("circle|square|stripes")).first).to_be_visible()
        shot(page, shots, f"own_images_{where}")
        no_exceptions(page)
