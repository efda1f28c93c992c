"""Escaping of untrusted names inside World State bodies (spec §4, reused by §7.5).

A directory name or layout entry comes from the filesystem or from a caller, so it may contain
markup or line breaks that would let it forge a tag or a line of its own. ``&``, ``<`` and ``>``
become entities, a newline and a carriage return become the two visible characters ``\\n`` /
``\\r``, and every other control character (Unicode category Cc, tab included) becomes U+FFFD.
"""

from __future__ import annotations

from typing import Final

__all__ = ["escape_text"]

_REPLACEMENT = "\ufffd"


def _build_table() -> dict[int, str]:
    table: dict[int, str] = {}
    # C0, DEL and C1 are exactly the code points of category Cc.
    for code in (*range(0x00, 0x20), *range(0x7F, 0xA0)):
        table[code] = _REPLACEMENT
    table[ord("\n")] = "\\n"
    table[ord("\r")] = "\\r"
    table[ord("&")] = "&amp;"
    table[ord("<")] = "&lt;"
    table[ord(">")] = "&gt;"
    return table


_TABLE: Final = _build_table()


def escape_text(text: str) -> str:
    """Escape ``text`` for a World State body line; one ``str.translate`` pass."""
    return text.translate(_TABLE)
