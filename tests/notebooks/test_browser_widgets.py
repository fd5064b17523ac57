"""The widgets of notebooks 01 and 02 in a real browser: JupyterLab driven by Debian's headless Chromium.

nbval compares stored outputs but never moves a slider, and a widget that does not render in JupyterLab (a
missing lab extension, an ipywidgets version mismatch) passes every other test. This test opens copies of the
stored notebooks the way a learner does, runs all cells, moves the sliders and steps the block map, and checks
what the page shows against what `pagedkv_lib` computes. Browser console errors fail it. A screenshot of
each state goes to tests/artifacts/browser/ (git-ignored).

    .venv/bin/pytest -m browser tests/notebooks/test_browser_widgets.py

Skipped where /usr/bin/chromium is missing (`.ci/run` installs it). Needs no browser download: Playwright
drives the system Chromium through `executable_path`.
"""
from __future__ import annotations

import contextlib
import io
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import browser_support as bs
import matplotlib.image as mpimg
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
ARTIFACTS = REPO / "tests" / "artifacts" / "browser"
NB01, NB02 = "01_why_paging.ipynb", "02_block_pool.ipynb"
MAX_LEN = 4096  # notebook 01's reservation (UtilizationExplorer's default)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.timeout(400),
    pytest.mark.skipif(not bs.CHROMIUM.exists(), reason=f"{bs.CHROMIUM} is missing (Debian: apt-get install "
                       "chromium); the browser test drives the system Chromium, it downloads none"),
]

# Console errors that are not the course's: (substring, why). Empty: on this JupyterLab, none occur.
ALLOWED_CONSOLE_ERRORS: list[tuple[str, str]] = []


@dataclass
class Lab:
    page: object
    server: bs.LabServer
    errors: bs.ConsoleErrors
    load_errors: int  # errors[:load_errors] happened while JupyterLab loaded: every test reports them
    timings: dict
    ran: set = field(default_factory=set)  # notebooks whose cells have all been run

    def new_errors(self, mark: int) -> list[str]:
        return self.errors.errors[:self.load_errors] + self.errors.errors[mark:]


@pytest.fixture(scope="module")
def lab(tmp_path_factory, pytestconfig):
    """JupyterLab serving copies of notebooks 01 and 02 in a temporary directory, and one Chromium page with
    01 open and 02 in a background tab. Both kernels are started as soon as the server answers, so they boot
    while the page loads. Server (with its kernels) and browser always shut down at the end."""
    start = time.perf_counter()
    from playwright.sync_api import sync_playwright

    missing = [name for name in (NB01, NB02) if not (NOTEBOOKS / name).exists()]
    if missing:
        pytest.fail(f"notebooks missing: {missing}; build them with `python notebooks/build.py 01 02`")
    root = tmp_path_factory.mktemp("lab")
    for name in (NB01, NB02):
        shutil.copy(NOTEBOOKS / name, root / name)  # the stored notebooks stay untouched
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("0[12]*.png"):
        old.unlink()
    timings, errors = {}, None
    try:
        with bs.jupyterlab(root) as server, sync_playwright() as playwright, \
                bs.chromium_context(playwright) as context:
            server.wait_until_up()
            for name in (NB01, NB02):
                server.start_kernel(name)  # both kernels boot while the page loads
            timings["server and browser up"] = time.perf_counter() - start
            page = context.new_page()
            page.set_default_timeout(60_000)
            errors = bs.ConsoleErrors(allowed=ALLOWED_CONSOLE_ERRORS)
            errors.attach(page)
            bs.open_lab(page, server, NB01)
            bs.open_in_background(page, NB02)
            timings["JupyterLab loaded"] = time.perf_counter() - start
            yield Lab(page, server, errors, len(errors.errors), timings)
    finally:  # server and browser are down by now, whatever happened
        timings["total with shutdown"] = time.perf_counter() - start
        report(pytestconfig, "browser test wall time: "
               + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
               + f"; {len(list(ARTIFACTS.glob('0[12]*.png')))} screenshots in {ARTIFACTS.relative_to(REPO)}/",
               *(f"allowed console error: {line}" for line in (errors.ignored if errors else [])))


def report(pytestconfig, *lines: str) -> None:
    """Print past pytest's output capture, so the wall time shows in every run (and in CI's log)."""
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print("\n" + "\n".join(lines), flush=True)


@contextlib.contextmanager
def page_on_failure(lab: Lab, name: str):
    """On any failure, save the whole page as tests/artifacts/browser/<name>_FAILED.png, then re-raise."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            lab.page.screenshot(path=str(ARTIFACTS / f"{name}_FAILED.png"), timeout=10_000)
        raise


def run_notebook(lab: Lab, name: str, again: bool = True):
    """Bring the notebook to the front and Run All Cells (unless it ran already and not `again`)."""
    panel = bs.activate(lab.page, name)
    if again or name not in lab.ran:
        bs.run_all_cells(lab.page, name)
        lab.ran.add(name)
    return panel


def screenshot(locator, name: str) -> Path:
    path = ARTIFACTS / f"{name}.png"
    locator.screenshot(path=str(path), animations="disabled")
    return path


def decode_png(data: bytes) -> np.ndarray:
    return mpimg.imread(io.BytesIO(data), format="png")  # [H, W, 4] float in 0..1


def assert_same_picture(shown: bytes, expected: bytes, what: str) -> None:
    a, b = decode_png(shown), decode_png(expected)
    assert a.shape == b.shape, f"{what}: the page shows a {a.shape} image, the library draws {b.shape}"
    differ = np.any(a != b, axis=-1)
    assert not differ.any(), f"{what}: {int(differ.sum())} pixels differ from the library's picture"


def assert_widgets_rendered(panel, *widgets) -> None:
    """Every widget is a visible ipywidgets view, and no output says the widget could not be shown."""
    for w in widgets:
        try:
            w.wait_for(state="visible", timeout=20_000)
        except Exception as exc:  # no view: the lab extension is missing, or the widget models failed
            outputs = panel.locator(".jp-OutputArea-output").filter(has_text="children=(")
            fallback = outputs.all_text_contents()
            raise AssertionError(f"widget not rendered: {w}; text fallbacks shown instead: "
                                 f"{[t[:100] for t in fallback]}") from exc
    for text in ("Error displaying widget", "Loading widget...", "Failed to load model class"):
        assert panel.get_by_text(text).count() == 0, f"an output shows {text!r}"


def wait_text(lab: Lab, locator, expected: list[str], what: str) -> str:
    """Wait until the element's text holds every expected piece; fail with what it shows instead."""
    try:
        return bs.wait_for_text(lab.page, locator, "(text, want) => want.every(w => text.includes(w))",
                                expected)
    except Exception as exc:  # playwright's TimeoutError: say what the learner would have seen
        shows = locator.text_content()
        raise AssertionError(f"{what}: expected {expected}, the page shows {shows!r}") from exc


# --- notebook 01: the utilization explorer --------------------------------------------------------------

def expected_utilization(block_size: int, num_requests: int) -> list[str]:
    """What notebook 01's line must say, straight from pagedkv_lib.studies.workload."""
    from pagedkv_lib.studies.workload import make_workload, utilization_paged, utilization_reserved

    requests = make_workload(num_requests=num_requests, seed=0)
    return [f"paged utilization: {100 * utilization_paged(requests, block_size):.1f}%",
            f"reserved utilization: {100 * utilization_reserved(requests, MAX_LEN):.1f}%"]


def test_notebook01_sliders_change_the_utilization(lab):
    with page_on_failure(lab, "01"):
        check_notebook01(lab)


def check_notebook01(lab: Lab) -> None:
    from pagedkv_lib.viz.memory_plots import UtilizationExplorer

    page, mark = lab.page, len(lab.errors.errors)
    t0 = time.perf_counter()
    panel = run_notebook(lab, NB01)
    lab.timings["01 run all"] = time.perf_counter() - t0
    block = panel.locator(".widget-slider.pagedkv-block-size")
    requests = panel.locator(".widget-slider.pagedkv-requests")
    text = panel.locator(".pagedkv-utilization")
    plot = panel.locator(".pagedkv-waste-plot")
    assert_widgets_rendered(panel, block, requests, text, plot)
    assert block.locator(".widget-label").text_content() == "block size"
    assert requests.locator(".widget-label").text_content() == "requests"
    output = panel.locator(".jp-OutputArea-output").filter(has=page.locator(".pagedkv-utilization"))

    # The same explorer in this process, driven through the same values: the picture it draws is what the
    # page must show, pixel for pixel.
    explorer = UtilizationExplorer()
    size, num = int(bs.slider_readout(block)), int(bs.slider_readout(requests))
    assert (size, num) == (explorer.block_size.value, explorer.requests.value)
    shown = wait_text(lab, text, expected_utilization(size, num), "after Run All")
    assert_same_picture(bs.image_bytes(plot), explorer.image.value, "waste plot after Run All")
    screenshot(output, f"01_initial_block{size}_requests{num}")

    # Drag the block-size handle to three quarters of its track, with the mouse.
    src = bs.image_src(plot)
    new_size = int(bs.drag_slider(page, block, 0.75))
    assert new_size != size, f"dragging the block-size slider left it at {size}"
    changed = wait_text(lab, text, expected_utilization(new_size, num), f"block size {size} -> {new_size}")
    assert changed != shown
    bs.wait_image_change(page, plot, src)
    explorer.block_size.value = new_size
    assert_same_picture(bs.image_bytes(plot), explorer.image.value, f"waste plot at block size {new_size}")
    screenshot(output, f"01_block{new_size}_requests{num}")

    # Type a request count into the requests slider's readout.
    src, shown = bs.image_src(plot), changed
    new_num = int(bs.type_slider(page, requests, 500))
    assert new_num == 500, f"the requests readout shows {new_num} after typing 500"
    changed = wait_text(lab, text, expected_utilization(new_size, new_num), f"requests {num} -> {new_num}")
    assert changed != shown
    bs.wait_image_change(page, plot, src)
    explorer.requests.value = new_num
    assert_same_picture(bs.image_bytes(plot), explorer.image.value, f"waste plot at {new_num} requests")
    screenshot(output, f"01_block{new_size}_requests{new_num}")

    bs.wait_kernel_idle(page, NB01)
    lab.timings["01 total"] = time.perf_counter() - t0
    assert not lab.new_errors(mark), "browser console errors:\n" + "\n".join(lab.new_errors(mark))


# --- notebook 02: the block-map stepper -----------------------------------------------------------------

def block_colors(picture: np.ndarray, stepper) -> list[tuple]:
    """The fill colour of every block in a rendered block map, read near each square's lower-left corner
    (clear of its label and border); positions come from the stepper's own axes. RGBA, 0..255."""
    n = len(stepper.owners)
    ncols = min(n, 16)                              # draw_block_map's default layout
    nrows = -(-n // ncols)
    height = picture.shape[0]
    colors = []
    for b in range(n):
        r, c = divmod(b, ncols)
        x, y = stepper.ax.transData.transform((c + 0.12, nrows - 1 - r + 0.12))
        patch = picture[int(height - y) - 1:int(height - y) + 2, int(x) - 1:int(x) + 2]  # 3 x 3 pixels
        colors.append(tuple(np.round(patch.reshape(-1, 4).mean(axis=0) * 255).astype(int)))
    return colors


def as_255(rgba_list) -> list[tuple]:
    return [tuple(np.round(np.asarray(c) * 255).astype(int)) for c in rgba_list]


def test_notebook02_block_map_steps_recolour_the_blocks(lab):
    with page_on_failure(lab, "02"):
        check_notebook02(lab)


def check_notebook02(lab: Lab) -> None:
    from pagedkv_lib.viz.block_map import WORKED_EXAMPLE, BlockMapStepper, owner_colors, pool_frames

    page, mark = lab.page, len(lab.errors.errors)
    t0 = time.perf_counter()
    panel = run_notebook(lab, NB02)
    lab.timings["02 run all"] = time.perf_counter() - t0
    step = panel.locator("button.pagedkv-step")
    back = panel.locator("button.pagedkv-back")
    text = panel.locator(".pagedkv-step-description")
    image = panel.locator(".pagedkv-block-map")
    assert_widgets_rendered(panel, step, back, text, image)
    output = panel.locator(".jp-OutputArea-output").filter(has=page.locator(".pagedkv-block-map"))

    # Notebook 02's stepper, replayed here: BlockMapStepper(pool_frames(8, WORKED_EXAMPLE)).
    stepper = BlockMapStepper(pool_frames(8, WORKED_EXAMPLE))
    previous = None
    for i in range(len(stepper.frames)):
        if i > 0:
            src, before = bs.image_src(image), stepper.image.value
            step.click()
            stepper.step()
            wait_text(lab, text, [f"step {i}/"], f"after {i} clicks on step")
            if stepper.image.value != before:  # an unchanged picture is not sent again: same src
                bs.wait_image_change(page, image, src)
        wait_text(lab, text, [stepper.describe()], f"step {i}")
        shown = bs.image_bytes(image)
        assert_same_picture(shown, stepper.image.value, f"block map at step {i}")
        colors, expected = block_colors(decode_png(shown), stepper), as_255(owner_colors(stepper.owners))
        assert all(max(abs(a - b) for a, b in zip(got, want)) <= 2 for got, want in zip(colors, expected)), \
            f"step {i}: block colours {colors}, the library's owners {stepper.owners} give {expected}"
        if previous is not None:  # the colours change exactly when the owners do (a failed allocate: not)
            assert (colors != previous[0]) == (expected != previous[1]), f"step {i}: colours {colors}"
        previous = (colors, expected)
        screenshot(output, f"02_step{i}")
    assert step.is_disabled(), "step is still enabled at the last frame"

    bs.wait_kernel_idle(page, NB02)
    lab.timings["02 total"] = time.perf_counter() - t0
    assert not lab.new_errors(mark), "browser console errors:\n" + "\n".join(lab.new_errors(mark))


# --- both: the pictures are not blown up ----------------------------------------------------------------

def test_widget_pictures_are_not_upscaled(lab):
    """A widgets.Image in a VBox is a flex item, stretched to the output's width by default: a 640 px PNG
    then shows at 844 px on a 1280 px window, blurred, its text a third larger than the page's. The pictures
    may shrink in a narrow window (max-width: 100%) but never grow beyond the pixels the library drew."""
    mark, shown = len(lab.errors.errors), {}
    for name, css in ((NB01, "pagedkv-waste-plot"), (NB02, "pagedkv-block-map")):
        panel = run_notebook(lab, name, again=False)
        shown[css] = panel.locator(f"img.{css}").evaluate(
            "e => ({natural: [e.naturalWidth, e.naturalHeight], shown: [e.clientWidth, e.clientHeight]})")
    blown_up = {css: s for css, s in shown.items() if s["shown"][0] > s["natural"][0]}
    assert not blown_up, (f"widget pictures shown larger than drawn (stretched, blurred): {blown_up}; "
                          "give the Image layout=widgets.Layout(align_self='flex-start')")
    assert not lab.new_errors(mark), "browser console errors:\n" + "\n".join(lab.new_errors(mark))
