"""What a user's sentence is worth keeping, and which earlier instruction a later one replaces.

Strength (spec §9; the order the ``local`` summarizer evicts in, docs/compaction.md):

- ``RED_LINE``: something forbidden — ``never``, ``do not``, ``read-only``, ``must not``,
  ``under no circumstances``, ``不要``, ``禁止``, ``只读``… — including the paraphrased and
  negative-example forms people actually use: "let's not do that", "we can't", "it blew up in
  production", "last time … broke prod", "not again", "别…", "千万…";
- ``RULE``: a softer standing requirement — ``only``, ``always``, ``make sure``, ``keep``,
  ``must``, ``at most``, ``必须``, ``仅``… — which everyday follow-ups ("Only look at the last
  hour", "Make sure to include the pod name") also use, so it is evicted before any red line;
- ``NONE``: neither.

A *revocation* replaces an earlier instruction: "scratch that", "never mind", "forget that",
"on second thought", "Redis 那个方案算了", "换成…", "改成…", "不用了", "X is lifted / no longer
applies". ``replaced_by`` finds the instruction it replaces: the latest earlier one sharing a
distinctive word with it (``Redis``, ``X-Forwarded-For``, ``缓存``); a plain "scratch that" with
no shared word replaces the instruction just before it. A revocation is itself a decision and
ranks with red lines.

*Ownership* — who owns, maintains or is on call for what, and who takes over from whom ("Alice
owns billing", "Carol takes over refunds from Alice", "账单服务由张三负责") — is a fact the
user states once and everything after depends on; ``states_ownership`` recognizes it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence

__all__ = ["Strength", "binding", "replaced_by", "revokes", "states_ownership", "strength"]


class Strength(enum.IntEnum):
    RED_LINE = 0
    RULE = 1
    NONE = 2


_RED_LINE = re.compile(
    r"""
    \b(?:never|don'?t|do\ not|does\ not|mustn'?t|must\ not|shouldn'?t|should\ not|shall\ not
      |(?:we|you|they|it)\ (?:can'?t|cannot|can\ not|won'?t)|let'?s\ not|let\ us\ not
      |read[-\ ]only|avoid|forbidden
      |prohibited|not\ allowed|under\ no\ circumstances|not\ again|no\ longer\ allowed
      |blew\ up|broke\ (?:prod|production|everything)|caused\ an?\ (?:outage|incident)
      |no\ (?:writes?|changes?|edits?|restarts?|deploys?|deletes?|access|network))\b
    | 不要 | 禁止 | 只读 | 不得 | 不能 | 不许 | 切勿 | 千万 | 严禁
    | (?:^|(?<=[^\u4e00-\u9fff])|(?<=[你请也就都先可]))别(?![人的处])  # not 特别, 区别, 识别
    """,
    re.IGNORECASE | re.VERBOSE,
)
_RULE = re.compile(
    r"""
    \b(?:must|only|always|ensure|make\ sure|required?|unless|without|at\ most|at\ least|keep
      |stay)\b
    | 必须 | 仅 | 务必 | 确保 | 一定要 | 只(?:能|用|看|改|读|查|在|允许|做|要)  # not 只是, 只有
    """,
    re.IGNORECASE | re.VERBOSE,
)
# A revocation that needs no shared word: it replaces the instruction just before it.
_REVOKES_LAST = re.compile(
    r"""
    \b(?:scratch\ that|never\ ?mind|forget\ (?:that|it|what\ i\ said)|on\ second\ thought
      |change\ of\ plans?|ignore\ (?:that|my\ (?:last|previous))|disregard\ (?:that|my)
      |cancel\ that|strike\ that)\b
    | 算了 | 不用了 | 取消
    """,
    re.IGNORECASE | re.VERBOSE,
)
# A revocation only of an earlier instruction that shares a distinctive word with it.
_REVOKES_NAMED = re.compile(
    r"""
    \b(?:instead|no\ longer\ (?:applies|needed|holds)|is\ lifted|lift(?:ed)?\ the|revoked?
      |rescinds?|supersedes?|replaces?|switch\ to|go\ with|drop\ the)\b
    | 换成 | 改成 | 改用 | 换用 | 不再
    """,
    re.IGNORECASE | re.VERBOSE,
)
_OWNERSHIP = re.compile(
    r"""
    \b(?:owns?|owned\ by|owners?\ of|takes?\ over|took\ over|hands?\ over|handed\ over
      |is\ responsible\ for|are\ responsible\ for|in\ charge\ of|maintained\ by
      |maintains|on[-\ ]call\ for)\b
    | 负责 | 归属 | 接手 | 接管
    """,
    re.IGNORECASE | re.VERBOSE,
)
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]|[A-Z]")
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")
# Words too common to tie a revocation to an instruction.
_COMMON_WORDS = """
    the a an and or but so that this it its is are was were be been to of in on at for with as per
    by from let lets let's we i you use using do not don't no yes ok okay actually instead
    scratch never mind forget thought second plan plans change switch go with drop then now
    just please also again time last next any all some there here what which who how why when
    should would could can will must only always make sure keep stay
"""
_COMMON = frozenset(_COMMON_WORDS.split())
# A plain "scratch that" looks this far back for a shared word.
NEARBY = 6
_COMMON_CJK = frozenset(["那个", "这个", "方案", "算了", "换成", "改成", "改用", "不用", "取消"])


def strength(text: str) -> Strength:
    """How strongly ``text`` binds (the strongest of its sentences); a revocation is a
    decision and binds as a red line."""
    if revokes(text):
        return Strength.RED_LINE
    return binding(text)


def binding(text: str) -> Strength:
    """How strongly the words of ``text`` forbid or require (revocations aside)."""
    text = text.replace("\u2019", "'")  # "don’t" as typed on phones and Macs
    if _RED_LINE.search(text) is not None:
        return Strength.RED_LINE
    if _RULE.search(text) is not None:
        return Strength.RULE
    return Strength.NONE


def states_ownership(text: str) -> bool:
    """Whether ``text`` says who owns or takes over what."""
    return _OWNERSHIP.search(text) is not None


def revokes(text: str) -> bool:
    """Whether ``text`` replaces an earlier instruction ("scratch that", "算了", "instead")."""
    text = text.replace("\u2019", "'")
    return _REVOKES_LAST.search(text) is not None or _REVOKES_NAMED.search(text) is not None


def _words(text: str) -> set[str]:
    latin = {w.casefold() for w in _LATIN_WORD.findall(text) if len(w) >= 3}
    cjk = {
        run[i : i + 2]
        for run in _CJK_RUN.findall(text)
        for i in range(len(run) - 1)
        if run[i : i + 2] not in _COMMON_CJK
    }
    return (latin - _COMMON) | cjk


def replaced_by(revocation: str, earlier: Sequence[str]) -> int | None:
    """The index in ``earlier`` (oldest first) of the instruction ``revocation`` replaces, or
    ``None``: the latest sharing a distinctive word with it (for a plain "scratch that", among
    the last ``NEARBY`` only), else — for a plain "scratch that" — the latest that is an
    instruction at all (not a bare question or acknowledgement)."""
    if not revokes(revocation):
        return None
    plain = _REVOKES_LAST.search(revocation) is not None
    words = _words(revocation)
    stop = max(0, len(earlier) - NEARBY) if plain else 0
    for index in range(len(earlier) - 1, stop - 1, -1):
        if words & _words(earlier[index]):
            return index
    if not plain:
        return None
    for index in range(len(earlier) - 1, -1, -1):
        candidate = earlier[index].strip()
        if len(candidate.split()) >= 3 or _CJK_RUN.search(candidate):
            return index
    return None
