"""Start and stop a real Label Studio server on 127.0.0.1 (from its own venv), for tests and local review.

The server gets a throw-away data folder, a known admin user and a legacy API token that works from the
first start, and serves local files from ``document_root`` so tasks can reference the project's images. Its database
is SQLite in the data folder (one machine) or PostgreSQL (a team): pass ``database=`` the ``DJANGO_DB`` / ``POSTGRE_*``
settings, e.g. ``PostgresCluster.env()`` or ``database_env(params.review.database)``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

DEFAULT_EXE = Path(".venv-labelstudio/bin/label-studio")


def database_env(db: Any) -> dict[str, str]:
    """Label Studio's database settings from ``review.database`` (the password from the environment variable it
    names)."""
    if db.engine == "sqlite":
        return {"DJANGO_DB": "sqlite"}
    password = os.environ.get(db.password_env)
    if not password:
        raise ValueError(f"review.database is postgresql but {db.password_env} is not set")
    return {"DJANGO_DB": "postgresql", "POSTGRE_HOST": db.host, "POSTGRE_PORT": str(db.port), "POSTGRE_NAME": db.name,
            "POSTGRE_USER": db.user, "POSTGRE_PASSWORD": password}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LabelStudioServer:
    def __init__(self, data_dir: str | Path, document_root: str | Path, exe: str | Path = DEFAULT_EXE,
                 port: int | None = None, username: str = "curator@example.org", password: str | None = None,
                 database: dict[str, str] | None = None, token: str | None = None) -> None:
        self.database = dict(database or {"DJANGO_DB": "sqlite"})
        self.exe = Path(exe).resolve()
        self.data_dir = Path(data_dir).resolve()
        self.document_root = Path(document_root).resolve()
        self.port = port or free_port()
        self.username = username
        self.password = password or secrets.token_hex(12)
        self.token = token or secrets.token_hex(20)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.data_dir / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("USERNAME", "PASSWORD", "PORT", "HOST")
               and not k.startswith("POSTGRE_")}
        env.update(self.database)
        env.update({
            "LABEL_STUDIO_BASE_DATA_DIR": str(self.data_dir),
            "LABEL_STUDIO_USERNAME": self.username, "LABEL_STUDIO_PASSWORD": self.password,
            "LABEL_STUDIO_USER_TOKEN": self.token, "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
            "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
            "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(self.document_root),
            "LABEL_STUDIO_LATEST_VERSION_CHECK": "false", "LABEL_STUDIO_COLLECT_ANALYTICS": "false",
            "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
            # nothing leaves the machine: no error reporting from the server or the pages it serves
            "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "", "SENTRY_RATE": "0", "FRONTEND_SENTRY_RATE": "0",
        })
        return env

    def start(self, timeout: float = 180.0) -> LabelStudioServer:
        if not self.exe.exists():
            raise FileNotFoundError(f"{self.exe}: Label Studio is not installed (make .venv-labelstudio)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = self.log.open("ab")
        self.proc = subprocess.Popen(
            [str(self.exe), "start", "--no-browser", "--internal-host", "127.0.0.1", "--port", str(self.port)],
            env=self.env(), stdout=log, stderr=subprocess.STDOUT, cwd=self.data_dir, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Label Studio exited with {self.proc.returncode}; see {self.log}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).json().get("status") == "UP":
                    return self
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"Label Studio did not answer /health within {timeout:.0f} s; see {self.log}")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, 15)
            self.proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with _suppress():
                os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> LabelStudioServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


def serve(params: Any, data_dir: Path, port: int, exe: Path = DEFAULT_EXE,
          on_ready: Any = None) -> int:
    """Run Label Studio for review until interrupted: ``review.database`` (SQLite in ``data_dir``, or the team's
    PostgreSQL), files served from ``review.local_files_root``, on 127.0.0.1 (put a TLS proxy in front for a team).
    The admin is ``LABEL_STUDIO_USERNAME`` / ``LABEL_STUDIO_PASSWORD`` / ``LABEL_STUDIO_USER_TOKEN`` when set (else
    generated); they take effect when the server data is created, later starts keep the existing admin."""
    fresh = not any(Path(data_dir).glob("*")) if Path(data_dir).exists() else True
    server = LabelStudioServer(data_dir, params.local_files_root, exe=exe, port=port,
                               username=os.environ.get("LABEL_STUDIO_USERNAME") or "curator@example.org",
                               password=os.environ.get("LABEL_STUDIO_PASSWORD"),
                               token=os.environ.get("LABEL_STUDIO_USER_TOKEN"), database=database_env(params.database))
    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupted)  # stopped by a supervisor: the server goes too
    try:
        server.start()
        if on_ready is not None:
            on_ready(server, fresh)
        assert server.proc is not None
        return server.proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)
