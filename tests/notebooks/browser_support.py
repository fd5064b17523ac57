"""Helpers of the browser test: a throwaway JupyterLab server, Debian's headless Chromium, notebook actions.

Used by tests/notebooks/test_browser_widgets.py. Nothing here is course-specific except the CSS classes the
tests pass in. The server runs from this interpreter's environment (`sys.executable -m jupyterlab`), so its
kernel imports the editable `pagedkv_lib` exactly as a learner's `make lab` does.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")

# The issue's flags. Without the network ones (background networking, component update, sync) Chromium
# stalls on a closed network; the fresh --user-data-dir comes from launch_persistent_context.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LabServer:
    """A running JupyterLab: its process (leader of its own process group), URL, token and log file."""

    proc: subprocess.Popen
    base_url: str
    token: str
    root_dir: Path
    log_path: Path

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}{path}{sep}token={self.token}"

    def wait_until_up(self, timeout: float = 90.0) -> None:
        """Poll /api/status until the server answers; fail with its log if it exits or times out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url("/api/status"), timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"jupyter lab did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def start_kernel(self, path: str) -> None:
        """Start the notebook's kernel now, through the REST call JupyterLab itself makes when it opens the
        notebook (POST /api/sessions); JupyterLab then finds the session by path and connects to it. Lets
        the kernels boot while the browser loads the page."""
        body = json.dumps({"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}})
        req = urllib.request.Request(self.url("/api/sessions"), data=body.encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 201, f"POST /api/sessions for {path}: HTTP {r.status}"

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"


def _descendants(pid: int) -> list[int]:
    """Process ids below `pid` (Linux /proc; elsewhere none are found). Kernels need this: jupyter_client
    starts each in a session of its own, outside the server's process group."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop_server(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop the server this module started: SIGTERM to its process group (it shuts its kernels down), then
    after `grace` seconds SIGKILL to the group and to any of its kernels still alive. Safe to call twice."""
    kernels = _descendants(proc.pid) if proc.poll() is None else []
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = None
    if pgid == proc.pid:  # the group start_new_session made for it, and nothing else
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    proc.wait(timeout=grace)
    for pid in kernels:  # normally gone already: the server shuts its kernels down on SIGTERM
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def jupyterlab(root_dir: Path):
    """Start JupyterLab on 127.0.0.1, a free port and a random token, serving `root_dir`; yield a LabServer
    at once (call its wait_until_up() before use: the caller can start the browser meanwhile).

    Settings, workspaces and runtime files live in a throwaway directory, so neither the user's JupyterLab
    settings nor a saved workspace change what the test sees. The server is always shut down on exit.
    """
    root_dir = Path(root_dir)
    home = Path(tempfile.mkdtemp(prefix="pagedkv-lab-home-"))
    token = secrets.token_hex(24)
    port = free_port()
    env = dict(os.environ)
    # A learner's kernel has matplotlib's inline backend; an MPLBACKEND inherited from the caller's
    # environment would replace it, and plt.show() in a notebook cell would show nothing.
    env.pop("MPLBACKEND", None)
    env.update({
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "IPYTHONDIR": str(home / "ipython"),
        # the kernel imports this checkout's pagedkv_lib, the one the test computes its expectations with
        "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                  env.get("PYTHONPATH", "")) if p),
    })
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.allow_root=True",  # CI containers run as root; a no-op for anyone else
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run cells through the app's commands
        f"--LabApp.user_settings_dir={home / 'settings'}", f"--LabApp.workspaces_dir={home / 'workspaces'}",
        # a closed network: no announcement feed, no update check, no PyPI extension manager
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    # A fresh user's first page load asks in a toast whether to fetch Jupyter news; answer "no" up front,
    # so the toast does not cover the widgets in the screenshots (and nothing tries to reach the network).
    notification = home / "settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    log_path = home / "jupyterlab.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(cmd, cwd=root_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    server = LabServer(proc, f"http://127.0.0.1:{port}", token, root_dir, log_path)
    try:
        yield server
    finally:
        stop_server(proc)
        log.close()
        shutil.rmtree(home, ignore_errors=True)


@dataclass
class ConsoleErrors:
    """Console messages of type error and uncaught page exceptions, with an allow-list of justified ones."""

    allowed: list[tuple[str, str]] = field(default_factory=list)  # (substring, why it is harmless)
    errors: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    def attach(self, page) -> None:
        page.on("console", lambda msg: msg.type == "error" and self._add(f"console.error: {msg.text}"))
        page.on("pageerror", lambda exc: self._add(f"uncaught exception: {exc}"))

    def _add(self, text: str) -> None:
        (self.ignored if any(s in text for s, _ in self.allowed) else self.errors).append(text)


@contextlib.contextmanager
def chromium_context(playwright, viewport=(1280, 900)):
    """Debian's Chromium, headless, with the issue's flags and a fresh user-data-dir; yields the context."""
    with tempfile.TemporaryDirectory(prefix="pagedkv-chromium-") as profile:
        ctx = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": viewport[0], "height": viewport[1]})
        try:
            yield ctx
        finally:
            ctx.close()


# --- JupyterLab actions, through window.jupyterapp (exposed by --LabApp.expose_app_in_browser) -----------
# Every function takes the notebook's path (relative to the server's root): several notebooks can be open.

_PANEL = """const panelFor = (path) => {
    const app = window.jupyterapp;
    if (!app) return null;
    for (const w of app.shell.widgets('main')) if (w.context && w.context.path === path) return w;
    return null;
};"""


def _js(body: str, is_async: bool = False) -> str:
    """A function of `arg` (the notebook's path). wait_for_function needs a plain one: it does not await a
    promise, which is truthy."""
    return f"{'async ' if is_async else ''}(arg) => {{ {_PANEL} {body} }}"


_READY_JS = _js("""const p = panelFor(arg);
    if (!p || !p.context.isReady || !p.sessionContext.isReady) return false;
    const k = p.sessionContext.session && p.sessionContext.session.kernel;
    return !!k && k.status === 'idle';""")

_OPEN_JS = _js("""await window.jupyterapp.commands.execute('docmanager:open',
    {path: arg, options: {activate: false}}); return true;""", is_async=True)

_ACTIVATE_JS = _js("""const p = panelFor(arg); window.jupyterapp.shell.activateById(p.id);
    await p.revealed; return window.jupyterapp.shell.currentWidget === p;""", is_async=True)

_RUN_ALL_JS = _js("""const p = panelFor(arg);
    if (window.jupyterapp.shell.currentWidget !== p) throw new Error(arg + ' is not the current notebook');
    const ok = await window.jupyterapp.commands.execute('notebook:run-all-cells');
    const cells = p.content.widgets.filter(c => c.model.type === 'code');
    return {ok, pending: cells.filter(c => c.model.executionCount === null).length, total: cells.length};""",
                 is_async=True)

_IDLE_JS = _js("""const p = panelFor(arg); const s = p && p.sessionContext.session;
    return !!(s && s.kernel && s.kernel.status === 'idle');""")

# The bytes behind an <img> (a blob: URL of an ipywidgets Image, or a data: URL of an output), base64.
_IMG_BYTES_JS = """async (el) => {
    const img = el.tagName === 'IMG' ? el : el.querySelector('img');
    const bytes = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
    let s = '';
    for (let i = 0; i < bytes.length; i += 8192) s += String.fromCharCode(...bytes.subarray(i, i + 8192));
    return btoa(s);
}"""


def open_lab(page, server: LabServer, path: str, timeout_ms: float = 90_000) -> None:
    """Load JupyterLab with `path` open (a learner's `jupyter lab path`); wait until its kernel is idle."""
    page.goto(server.url(f"/lab/tree/{path}"), wait_until="domcontentloaded", timeout=timeout_ms)
    page.wait_for_function(_READY_JS, arg=path, timeout=timeout_ms, polling=200)


def open_in_background(page, path: str, timeout_ms: float = 30_000) -> None:
    """Open another notebook as a background tab: its kernel starts now, while the current one works."""
    page.evaluate(_OPEN_JS, path)
    page.wait_for_function(_js("return !!panelFor(arg);"), arg=path,
                           timeout=timeout_ms, polling=200)


def panel_locator(page, path: str):
    """The notebook panel (tab content) of `path`, as a locator: queries inside it ignore other notebooks."""
    panel_id = page.evaluate(_js("const p = panelFor(arg); return p ? p.id : null;"), path)
    assert panel_id, f"{path} is not open in JupyterLab"
    return page.locator(f"[id='{panel_id}']")


def activate(page, path: str, timeout_ms: float = 90_000):
    """Bring the notebook's tab to the front once its kernel is idle; return a locator of its panel."""
    page.wait_for_function(_READY_JS, arg=path, timeout=timeout_ms, polling=200)
    assert page.evaluate(_ACTIVATE_JS, path), f"could not activate the tab of {path}"
    panel = panel_locator(page, path)
    panel.wait_for(state="visible", timeout=timeout_ms)
    return panel


def run_all_cells(page, path: str, timeout_ms: float = 180_000) -> None:
    """Run > Run All Cells in the (current) notebook `path`, wait for every code cell to finish, and fail on
    an error output or a cell left unexecuted."""
    result = page.evaluate(_RUN_ALL_JS, path)  # resolves when the last cell has run
    panel = panel_locator(page, path)
    errors = panel.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]')
    assert result["ok"] is not False, f"Run All Cells stopped on an error: {errors.all_text_contents()}"
    assert result["pending"] == 0, f"{result['pending']} of {result['total']} code cells did not run"
    page.wait_for_function(_IDLE_JS, arg=path, timeout=timeout_ms, polling=200)
    assert panel.locator(".jp-InputPrompt", has_text="[*]").count() == 0, "a cell still shows [*]"
    assert errors.count() == 0, f"error outputs after Run All Cells: {errors.all_text_contents()}"


def wait_kernel_idle(page, path: str, timeout_ms: float = 60_000) -> None:
    page.wait_for_function(_IDLE_JS, arg=path, timeout=timeout_ms, polling=100)


def image_bytes(locator) -> bytes:
    """The PNG (or other) bytes an <img> shows, read back from the browser: what the learner sees."""
    return base64.b64decode(locator.evaluate(_IMG_BYTES_JS))


def image_src(locator) -> str:
    return locator.evaluate("el => (el.tagName === 'IMG' ? el : el.querySelector('img')).src")


def wait_image_change(page, locator, old_src: str, timeout_ms: float = 30_000) -> None:
    """Wait until the <img> at `locator` shows a new src (ipywidgets replaces the blob URL on each value)."""
    locator.element_handle().wait_for_element_state("visible", timeout=timeout_ms)
    page.wait_for_function(
        "([el, old]) => { const img = el.tagName === 'IMG' ? el : el.querySelector('img');"
        " return !!img && img.src !== old && img.complete; }",
        arg=[locator.element_handle(), old_src], timeout=timeout_ms, polling=100)


def slider_readout(slider) -> str:
    return slider.locator(".widget-readout").text_content().strip()


def _wait_readout_change(slider, old: str, timeout_ms: float) -> str:
    readout = slider.locator(".widget-readout")
    readout.page.wait_for_function("([el, old]) => el.textContent.trim() !== old",
                                   arg=[readout.element_handle(), old], timeout=timeout_ms, polling=50)
    return slider_readout(slider)


def drag_slider(page, slider, fraction: float, timeout_ms: float = 10_000) -> str:
    """Drag an ipywidgets slider's handle with the mouse to `fraction` (0..1) of its track, as a learner
    does; return the new readout. With continuous_update=False the kernel sees one value, at release."""
    slider.scroll_into_view_if_needed()
    old = slider_readout(slider)
    track = slider.locator(".noUi-target").bounding_box()
    handle = slider.locator(".noUi-handle").bounding_box()
    y = handle["y"] + handle["height"] / 2
    page.mouse.move(handle["x"] + handle["width"] / 2, y)
    page.mouse.down()
    page.mouse.move(track["x"] + fraction * track["width"], y, steps=8)
    page.mouse.up()
    return _wait_readout_change(slider, old, timeout_ms)


def type_slider(page, slider, value: int, timeout_ms: float = 10_000) -> str:
    """Type a value into an ipywidgets 8 slider's editable readout and press Enter; return the readout."""
    old = slider_readout(slider)
    slider.locator(".widget-readout").click()
    page.keyboard.press("ControlOrMeta+a")  # inside the contenteditable readout: selects just its text
    page.keyboard.type(str(value))
    page.keyboard.press("Enter")
    return old if str(value) == old else _wait_readout_change(slider, old, timeout_ms)


def wait_for_text(page, locator, predicate_js: str, arg=None, timeout_ms: float = 30_000) -> str:
    """Poll until `predicate_js(text, arg)` holds for the element's textContent; return that text. (Not
    innerText: JupyterLab's notebook skips rendering off-screen cells, whose innerText is then empty.)"""
    handle = page.wait_for_function(
        f"([el, arg]) => {{ const text = el.textContent;"
        f" return ({predicate_js})(text, arg) ? text : false; }}",
        arg=[locator.element_handle(), arg], timeout=timeout_ms, polling=100)
    return handle.json_value()
