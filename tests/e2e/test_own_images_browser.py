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
from st_helpers import start_streamlit, stop_streamlit, wait_for_app_run
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
        z.writestr("shapes/circle/notes.txt", "not a picture")
    return buf.getvalue()


@pytest.fixture
def fresh_server(tmp_path, app_env):
    """A server with a model folder, user folder and cache of its own: what this test trains and
    unpacks is seen by no other test."""
    import shutil

    folder = tmp_path / "models"
    shutil.copytree(app_env["CAPSVIZ_CHECKPOINTS"], folder)
    env = dict(app_env, CAPSVIZ_CHECKPOINTS=str(folder), CAPSVIZ_HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc, url = start_streamlit(env, tmp_path / "server.log")
    yield {"url": url, "checkpoints": folder}
    print(f"server exit status: {stop_streamlit(proc)}")


def test_a_zip_of_colour_pictures_is_trained_on_and_explored_from_the_browser(page, fresh_server, shots, tmp_path):
    own_server = fresh_server
    path = tmp_path / "shapes.zip"
    path.write_bytes(shapes_zip())
    page.set_default_timeout(120_000)
    open_page(page, own_server["url"] + "/train", "Train")
    page.get_by_test_id("stMain").get_by_label("Dataset", exact=True).click()
    page.get_by_role("option", name="your own images (zip)").click()
    wait_for_app_run(page)
    page.locator("input[type=file]").set_input_files(str(path))
    expect(page.get_by_text(re.compile(r"3 classes"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"32x32 colour"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"Skipped: 1 not an image"))).to_be_visible()  # the .txt, skipped and counted
    wait_for_app_run(page)
    shot(page, shots, "own_images_summary")
    expect(page.get_by_text(re.compile(r"an epoch is 1 step"))).to_be_visible()  # batch 128 on 102 images: said, with a fix
    for label, value in (("Batch size", 10), ("Epochs", 8)):
        field = page.get_by_label(label, exact=True)
        field.fill(str(value))
        field.press("Enter")
        wait_for_app_run(page)
    expect(page.get_by_text(re.compile(r"an epoch is"))).to_have_count(0)
    name = page.get_by_label("Save as", exact=True).and_(page.get_by_test_id("stTextInputField"))
    name.fill("shapes")
    page.get_by_role("button", name="Start training").click()
    expect(page.get_by_text(re.compile(r"Finished: saved shapes.safetensors at \d\d:\d\d UTC"))).to_be_visible(timeout=300_000)
    expect(page.get_by_text(re.compile(r"epoch 8: test error"))).to_be_visible()
    wait_for_app_run(page)
    shot(page, shots, "own_images_trained")
    no_exceptions(page)
    assert (own_server["checkpoints"] / "shapes.safetensors").is_file()

    for where in ("explorer", "routing", "tour", "zoo"):
        page.goto(own_server["url"] + f"/{where}?model=shapes.safetensors&step=9")  # the chapter's one step first
        wait_for_app_run(page)
        if where == "tour":  # the lengths step: the answer named in words
            expect(page.get_by_text(re.compile(r"The answer is the longest class capsule: (circle|square|stripes)"))).to_be_visible()
        else:
            expect(page.get_by_text(re.compile("circle|square|stripes")).first).to_be_visible()
        shot(page, shots, f"own_images_{where}")
        no_exceptions(page)
    # the routing lab measures this model on its own 18 test images, each routing in turn
    page.goto(own_server["url"] + "/lab?model=shapes.safetensors")
    wait_for_app_run(page)
    page.get_by_role("button", name="Run the lab").click()
    expect(page.get_by_text("Does routing matter? The short answer")).to_be_visible(timeout=300_000)
    page.get_by_text(re.compile(r"^shapes, trained with")).first.click()  # the model's details, folded
    expect(page.get_by_text(re.compile(r"\*?\*?shapes\*?\*? \(trained with dynamic\) run with")).first).to_be_visible()
    shot(page, shots, "own_images_lab")
    no_exceptions(page)
