"""Map a pure per-file function locally (processes) or on a Dask cluster, keeping input order."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

from curation.errors import ServiceError

T = TypeVar("T")
R = TypeVar("R")


def pmap(
    fn: Callable[[T], R],
    items: Iterable[T],
    *,
    workers: int = 1,
    scheduler: str | None = None,
    chunksize: int = 1,
) -> Iterator[R]:
    """Results come back in input order, so outputs stay deterministic whatever the executor.

    ``scheduler`` is a Dask address (``tcp://host:8786``) or a ``distributed.Client``; ``workers``
    > 1 uses local processes; otherwise work runs in this process.
    """
    if scheduler is not None:
        yield from _dask_map(fn, items, scheduler)
        return
    if workers <= 1:
        for item in items:
            yield fn(item)
        return
    with ProcessPoolExecutor(max_workers=workers, initializer=_die_with_parent, initargs=(os.getpid(),)) as pool:
        yield from pool.map(fn, items, chunksize=chunksize)


def _die_with_parent(parent: int) -> None:
    """A pool worker ends when its parent does, even killed with SIGKILL (which runs no clean-up): on Linux the
    kernel sends it SIGKILL (PR_SET_PDEATHSIG); elsewhere, and as a second line, a daemon thread watches the parent
    pid. Without this a killed run leaves its workers blocked for ever on the task queue."""
    import signal
    import threading
    import time

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def _dask_map(fn: Callable[[T], R], items: Iterable[T], scheduler: object) -> Iterator[R]:
    from distributed import Client

    own = not isinstance(scheduler, Client)
    try:
        client = Client(scheduler, timeout=20) if own else scheduler
    except (OSError, TimeoutError) as exc:
        raise ServiceError(f"cannot reach Dask scheduler {scheduler}: {exc}") from None
    try:
        batch = list(items)
        # records hold paths relative to the project folder: workers (on a shared filesystem) work from the same one
        task = functools.partial(_in_folder, fn, os.getcwd())
        futures = client.map(task, batch, pure=False)  # type: ignore[union-attr]
        for fut in futures:
            yield fut.result()
    finally:
        if own:
            client.close()  # type: ignore[union-attr]


def _in_folder(fn: Callable[[T], R], folder: str, item: T) -> R:
    if os.getcwd() != folder:
        os.chdir(folder)
    return fn(item)
