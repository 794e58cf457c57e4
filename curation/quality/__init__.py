"""Quality gates and patient-disjoint splits."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def registered(package: str, path: Iterable[str], attr: str, kind: type[T]) -> tuple[T, ...]:
    """What each module of ``package`` defines as ``attr`` (a ``kind`` with a ``name`` and an ``order``), in order
    then name: a registry that is its folder, so adding one is adding a module (the item gates, the blind
    baselines). A module without it is an error naming the module."""
    found: list[Any] = []
    for mod in pkgutil.iter_modules(path):
        value = getattr(importlib.import_module(f"{package}.{mod.name}"), attr, None)
        if not isinstance(value, kind):
            raise TypeError(f"{package}.{mod.name} defines no {attr} (a {kind.__name__})")
        found.append(value)
    return tuple(sorted(found, key=lambda v: (v.order, v.name)))
