"""How far two sequences hold the very same objects, in C-level passes (no Python loop per
element): a turn's next model call repeats the previous call's objects and adds a few, and
what was built for those objects is taken instead of being built again."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import is_
from typing import Any

__all__ = ["leading", "same_objects"]


def leading(flags: Iterable[bool]) -> int:
    """How many of ``flags`` are true before the first false one."""
    listed = list(flags)
    try:
        return listed.index(False)
    except ValueError:
        return len(listed)


def same_objects(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading elements ``a`` and ``b`` share by identity (``is``, never ``==``)."""
    return leading(map(is_, a, b))
