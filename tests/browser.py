"""Headless Chromium driven over the DevTools protocol: log in to Label Studio, open a task, screenshot it."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import websocket

from curation.testing.labelstudio import free_port


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def login_cookie(base_url: str, email: str, password: str) -> str:
    """Log in through Label Studio's own login form; returns the session cookie value."""
    with httpx.Client(base_url=base_url, follow_redirects=False, timeout=30) as c:
        c.get("/user/login/")
        csrf = c.cookies.get("csrftoken")
        r = c.post("/user/login/", data={"email": email, "password": password, "csrfmiddlewaretoken": csrf},
                   headers={"Referer": f"{base_url}/user/login/", "X-CSRFToken": csrf or ""})
        session = c.cookies.get("sessionid")
        if r.status_code not in (200, 302) or not session:
            raise RuntimeError(f"login failed: HTTP {r.status_code}")
        return session


class Page:
    def __init__(self, ws_url: str) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=30)
        self.n = 0

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        self.ws.send(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expr: str) -> Any:
        return self.send("Runtime.evaluate", expression=expr, returnByValue=True)["result"].get("value")

    def wait_for(self, expr: str, timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.eval(expr):
                return True
            time.sleep(0.5)
        return False


def screenshot_task(base_url: str, cookie: str, url: str, out: Path, ready: str, timeout: float = 90) -> dict[str, Any]:
    """Open ``url`` logged in, wait until JS ``ready`` is true, save a PNG; returns what the page showed."""
    port = free_port()
    profile = tempfile.mkdtemp(prefix="chromium-")
    proc = subprocess.Popen([chromium() or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                             "--disable-background-networking", "--disable-dev-shm-usage", "--no-first-run",
                             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # loopback only
                             f"--user-data-dir={profile}", "--window-size=1400,1000",
                             f"--remote-debugging-port={port}", "--remote-allow-origins=*", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        targets: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not targets:
            try:
                targets = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
                           if t.get("type") == "page"]
            except httpx.HTTPError:
                time.sleep(0.3)
        page = Page(targets[0]["webSocketDebuggerUrl"])
        page.send("Network.enable")
        page.send("Network.setCookie", name="sessionid", value=cookie, url=base_url)
        page.send("Page.enable")
        page.send("Page.navigate", url=url)
        ok = page.wait_for(ready, timeout)
        time.sleep(1.0)  # let the canvas paint
        shot = page.send("Page.captureScreenshot", format="png")
        out.write_bytes(base64.b64decode(shot["data"]))
        text = page.eval("document.body.innerText") or ""
        images = page.eval("Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0)"
                           ".map(i => i.src)") or []
        page.ws.close()
        return {"ready": ok, "text": text, "images": images}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)
