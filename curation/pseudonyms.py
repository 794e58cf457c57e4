"""The project secret, keyed hashes and pseudonymous ids."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from curation.errors import ParamsError
from curation.records import write_text

SECRET_ENV = "CURATION_SECRET"
SECRET_FILE = Path(".curation/secret")  # under the project root


def project_secret(root: Path | None = None) -> bytes:
    """The key for pseudonymous ids, date shifts and UID remapping: ``CURATION_SECRET``, else the git-ignored
    ``<root>/.curation/secret`` (made once). The CLI resolves it from the project root (the folder of ``--params``)
    and passes it to the stages; without ``root`` only the environment is read, so library code never creates a
    file in whatever the working directory is.

    It is never written into any output; losing it only means ids change on the next run.
    """
    env = os.environ.get(SECRET_ENV)
    if env:
        return env.encode()
    if root is None:
        raise ParamsError(f"no project secret: set {SECRET_ENV}, or pass the secret from the project root "
                          f"(curate keeps one in <project>/{SECRET_FILE.as_posix()})")
    path = Path(root) / SECRET_FILE
    if path.exists():
        return path.read_text(encoding="utf-8").strip().encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    gitignore = path.parent / ".gitignore"
    if not gitignore.exists():
        write_text(gitignore, "*\n")
    value = secrets.token_hex(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")
    return value.encode()


def keyed_hash(*parts: str, secret: bytes | None = None, length: int = 16) -> str:
    """HMAC-SHA256 of ``parts`` under ``secret`` (None: ``CURATION_SECRET``; stages pass the project's)."""
    key = project_secret() if secret is None else secret
    msg = "\x1f".join(parts).encode()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()[:length]


def pseudonym(source: str, source_id: str, secret: bytes | None = None) -> str:
    """Stable pseudonymous case id: same source id and secret -> same id, across runs."""
    return f"{source.replace('-', '')[:6]}-{keyed_hash('case', source, source_id, secret=secret, length=12)}"
