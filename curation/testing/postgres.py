"""A throw-away PostgreSQL cluster on 127.0.0.1 (Debian's postgresql package: initdb, pg_ctl), for a team-server
Label Studio in tests and local trials. Password (SCRAM) authentication over TCP only; no Unix socket outside the
cluster's own folder. Run as root (containers), the server runs as the ``postgres`` user, as Debian does."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from curation.testing.labelstudio import free_port

DEBIAN_BIN = Path("/usr/lib/postgresql")


def pg_bin(name: str) -> str | None:
    """A PostgreSQL program from PATH, else from Debian's versioned folder (not on PATH by default)."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(DEBIAN_BIN.glob("*/bin/" + name), key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    return str(versions[-1]) if versions else None


class PostgresCluster:
    def __init__(self, user: str = "labelstudio", database: str = "labelstudio", port: int | None = None) -> None:
        self.user = user
        self.database = database
        self.port = port or free_port()
        self.password = secrets.token_hex(16)
        self.dir = Path(tempfile.mkdtemp(prefix="medbench-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self.started = False

    def _run(self, *args: str) -> None:
        out = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed: {(out.stderr or out.stdout).strip()[-300:]}")

    def start(self) -> PostgresCluster:
        initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
        if not initdb or not pg_ctl:
            raise FileNotFoundError("PostgreSQL is not installed (initdb, pg_ctl): `make postgresql` installs it")
        pwfile = self.dir / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self._as:
            pw = pwd.getpwnam("postgres")
            os.chown(pwfile, pw.pw_uid, pw.pw_gid)
        os.chmod(pwfile, 0o600)
        self._run(initdb, "-D", str(self.data), "-U", self.user, f"--pwfile={pwfile}", "-E", "UTF8",
                  "--no-locale", "--auth-host=scram-sha-256", "--auth-local=scram-sha-256")
        pwfile.unlink()
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off -c full_page_writes=off"
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", "60", "start")
        self.started = True
        self._createdb()
        return self

    def _createdb(self) -> None:
        createdb = pg_bin("createdb")
        if not createdb:
            raise FileNotFoundError("createdb is missing from the PostgreSQL installation")
        env = {**os.environ, "PGPASSWORD": self.password}
        out = subprocess.run([createdb, "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, self.database],
                             capture_output=True, text=True, timeout=60, env=env, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"createdb failed: {out.stderr.strip()[-300:]}")

    def env(self) -> dict[str, str]:
        """What Label Studio needs to use this cluster (its DJANGO_DB / POSTGRE_* settings)."""
        return {"DJANGO_DB": "postgresql", "POSTGRE_HOST": "127.0.0.1", "POSTGRE_PORT": str(self.port),
                "POSTGRE_NAME": self.database, "POSTGRE_USER": self.user, "POSTGRE_PASSWORD": self.password}

    def stop(self) -> None:
        pg_ctl = pg_bin("pg_ctl")
        if self.started and pg_ctl:
            try:
                self._run(pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop")
            except RuntimeError:
                pass
            self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
