"""Errors the toolkit raises on purpose; the CLI turns each into one line and an exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class CurationError(Exception):
    """Base class: a problem the user can act on, reported as one line."""

    exit_code = 1

    def __init__(self, message: str, path: object | None = None) -> None:
        self.path = None if path is None else str(path)
        super().__init__(f"{self.path}: {message}" if self.path else message)


class ParamsError(CurationError):
    exit_code = 2


class InputError(CurationError):
    """An input file or folder that cannot be used at all."""

    exit_code = 3


class RecordError(CurationError):
    """A malformed record in a JSONL/JSON file the toolkit wrote or reads."""

    exit_code = 4


class FailureRateExceeded(CurationError):
    """More inputs failed than the stage's max_failure_rate allows."""

    exit_code = 5


class VerificationError(CurationError):
    """A release or output did not verify (checksums, residual PHI, schema)."""

    exit_code = 6


class ServiceError(CurationError):
    """An external service (LLM endpoint, Label Studio) could not be used."""

    exit_code = 7


class BusyError(CurationError):
    """Another run is writing the same output (one writer per output folder)."""

    exit_code = 8


class ResourceError(BaseException):
    """The machine, not an input, failed a write: disk full, quota, permission, read-only filesystem.

    A BaseException (as KeyboardInterrupt is) on purpose: per-input handlers catch ``Exception`` to turn one bad
    input into a quarantine entry, and a full disk must stop the run instead, with the previous output kept. The CLI
    reports it as one line, like a CurationError."""

    exit_code = 9

    def __init__(self, message: str, path: object | None = None, what: str = "") -> None:
        self.path = None if path is None else str(path)
        self.what = what or message  # the fault alone ("no space left on the device"), for a caller to re-word
        super().__init__(f"{self.path}: {message}" if self.path else message)

    def __reduce__(self) -> tuple[object, ...]:  # crosses process pools whole
        return (_rebuild_resource_error, (str(self), self.path, self.what))


def _rebuild_resource_error(text: str, path: str | None, what: str) -> ResourceError:
    err = ResourceError(text, None, what)
    err.path = path
    return err


def validation_message(exc: ValidationError) -> str:
    """A pydantic ``ValidationError`` as one line: where its first error is, and what it is (``a.b: msg``)."""
    first = exc.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
