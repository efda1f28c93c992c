"""The salient-line rule (spec §9, ``app/core/pipeline/salient.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.pipeline import salient, salient_search
from app.core.pipeline.salient import (
    SALIENT_LINE_CHARS,
    SalientLine,
    SalientLineMemo,
    salient_lines,
    salient_lines_of,
    salient_section,
)


def found(*lines: str) -> list[str]:
    """The texts of the salient lines of ``lines`` joined, the whole text being the cut part."""
    text = "\n".join(lines)
    return [line.text for line in salient_lines(text, 0, len(text))]


@pytest.mark.parametrize(
    "line",
    [
        "src/billing/refund.py:42: error: Incompatible types in assignment",
        "ERROR: connection refused",
        "error[E0308]: mismatched types",
        "FAILED tests/test_refund.py::test_partial - AssertionError: 3 != 4",
        "--- FAIL: TestRefund (0.01s)",
        "Tests: 2 failed, 40 passed, 42 total",
        "thread 'main' panicked at src/main.rs:12:5:",
        "panic: runtime error: index out of range [3] with length 3",
        "Segmentation fault (core dumped)",
        "npm ERR! code ELIFECYCLE",
        "E       assert 3 == 4",
        "Process finished with exit code 137",
        "exited with status 2",
        "exit status: 1",
        "make: *** [Makefile:12: all] Error 2",
        "subprocess.CalledProcessError: Command 'x' returned non-zero exit status 1.",
        'Exception in thread "main" java.lang.NullPointerException',
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1",
        "fatal: not a git repository (or any of the parent directories): .git",
        "ls: cannot access 'x': No such file or directory",
        "bash: foo: command not found",
        "Killed",
        "Reason: OOMKilled",
        "open /etc/shadow: permission denied",
        "request timed out after 30 s",
        "assertion `left == right` failed",
        "/usr/bin/ld: main.o: undefined reference to `foo'",
        "Tests run: 5, Failures: 1, Errors: 0",  # one failure: the count of errors is 0
        "    Expected: 5",
        "    Received: 4",
        "expected:<5> but was:<4>",
    ],
)
def test_lines_that_are_salient(line: str) -> None:
    assert found("build started", line, "build ended") == [line]


@pytest.mark.parametrize(
    "line",
    [
        "INFO all good",
        "0 errors, 0 warnings",
        "No failures found.",
        "errors: 0",
        "tests passed: 5, failed: 0",
        "exit code 0",
        "exited with status 0",
        "gcc -Wall -Werror -O2 main.c",
        "registered the on_error handler",
        "failover complete",
        "the mirror is a terror",
        "ERRORS_TOTAL=0",
        "an exit was taken",
        "error_rate=0.1% (INC-42)",
        "Everything passed without errors",
        "the expected output is in golden.txt",
    ],
)
def test_lines_that_are_not(line: str) -> None:
    assert found("build started", line, "build ended") == []


def test_the_last_line_of_a_python_traceback_is_salient_whatever_it_says() -> None:
    text = "\n".join(
        [
            "running",
            "Traceback (most recent call last):",
            '  File "app.py", line 3, in <module>',
            "    main()",
            "KeyboardInterrupt",
            "next step",
        ]
    )
    [line] = salient_lines(text, 0, len(text))
    assert (line.number, line.text) == (5, "KeyboardInterrupt")


def test_a_traceback_cut_short_by_a_blank_line_has_no_last_line() -> None:
    text = "Traceback (most recent call last):\n  File 'a.py'\n\nplain text"
    assert salient_lines(text, 0, len(text)) == ()


def test_only_lines_touching_the_range_count_with_their_numbers_in_the_whole_text() -> None:
    lines = ["error: first"] + ["ok"] * 10 + ["error: middle"] + ["ok"] * 10 + ["error: last"]
    text = "\n".join(lines)
    middle = text.index("error: middle")
    got = salient_lines(text, middle + 3, middle + 4)  # one character of the middle line
    assert [(line.number, line.text) for line in got] == [(12, "error: middle")]
    assert salient_lines(text, text.index("ok"), text.index("error: middle")) == ()


def test_identical_lines_are_listed_once_with_how_often_and_where_they_last_were() -> None:
    text = "\n".join(["ERROR: db down", "retrying", "ERROR: db down", "ERROR: db down", "ok"])
    [line] = salient_lines(text, 0, len(text))
    assert line == SalientLine(1, "ERROR: db down", repeats=2, last_number=4)
    assert line.render() == "1: ERROR: db down [2 more times, last at line 4]\n"


def test_carriage_returns_are_not_shown() -> None:
    text = "ok\r\nerror: windows\r\nok\r\n"
    assert [line.text for line in salient_lines(text, 0, len(text))] == ["error: windows"]


def test_a_long_line_is_shown_as_a_window_around_its_match() -> None:
    line = "x" * 1000 + " error: deep inside " + "y" * 1000
    [shown] = found(line)
    assert shown.startswith("…")
    assert shown.endswith("…")
    assert "error: deep inside" in shown
    assert len(shown) == SALIENT_LINE_CHARS + 2


def test_non_ascii_text_keeps_its_offsets() -> None:
    text = "İstanbul ünïcödé 界\n" * 50 + "错误 error: 失败\n" + "界" * 100
    [line] = salient_lines(text, 0, len(text))
    assert (line.number, line.text) == (51, "错误 error: 失败")


def test_the_section_lists_what_fits_and_counts_the_rest() -> None:
    lines = [SalientLine(n, f"error {n}") for n in range(1, 101)]
    section, listed = salient_section(lines, 200)
    assert len(section) <= 200
    assert section.startswith("[salient lines of the cut part (line number: text)]\n1: error 1\n")
    assert section.endswith(f"[end of salient lines; {100 - listed} more not shown]\n")
    assert 0 < listed < 100
    # One character more than needed for everything: all listed, the plain footer.
    whole = salient_section(lines, 10_000)[0]
    assert salient_section(lines, len(whole)) == (whole, 100)
    assert whole.endswith("100: error 100\n[end of salient lines]\n")


def test_a_section_that_cannot_hold_one_line_is_empty() -> None:
    assert salient_section([SalientLine(1, "error")], 20) == ("", 0)
    assert salient_section([], 10_000) == ("", 0)


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet="ab \nEerorfailxt:0İ界", max_size=400), st.data())
def test_lines_are_in_order_inside_the_range_and_the_same_every_time(
    text: str, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(text)))
    stop = data.draw(st.integers(start, len(text)))
    got = salient_lines(text, start, stop)
    numbers = [line.number for line in got]
    assert numbers == sorted(set(numbers))
    all_lines = text.split("\n")
    for line in got:
        assert line.text == all_lines[line.number - 1].rstrip("\r")
    assert salient_lines(str(text), start, stop) == got


def test_remembered_lines_are_the_lines_found_afresh() -> None:
    text = "\n".join(["ok"] * 50 + ["error: once", "ERROR: twice", "ERROR: twice"] + ["ok"] * 50)
    memo = SalientLineMemo()
    first = salient_lines(text, 10, len(text) - 10, memo=memo)
    again = salient_lines("".join(list(text)), 10, len(text) - 10, memo=memo)  # equal, new
    assert salient_lines(text, 10, len(text) - 10) == first == again  # no memo: found afresh
    assert salient_lines_of(text) == first  # the whole text, never remembered


def _one_search_per_keyword(text: str) -> list[tuple[int, int]]:
    """``_first_matches`` as it was before keywords shared searches: a search per keyword."""
    low = text.lower() if text.isascii() else text.translate(salient_search._ASCII_LOWER)
    first: dict[int, int] = {}
    for keyword in salient_search._KEYWORDS:
        at = low.find(keyword)
        while at >= 0:
            line = low.rfind("\n", 0, at) + 1
            if salient_search.matches_at(text, low, at, keyword, line):
                first[line] = min(first.get(line, at), at)
                at = low.find("\n", at)
                if at < 0:
                    break
            at = low.find(keyword, at + 1)
    return sorted(first.items())


# The keywords that share a search, their neighbours and what makes a word of them or not.
_PIECES = st.sampled_from(
    [
        "error", "ERROR", "Error", "Value", "err!", "ERR!", "err", "killed", "oomkilled",
        "OOMKilled", "oom", "exit", "non-zero exit", "non-zero ", " code 1", " status 0",
        "exception", "E  ", "e  ", "x", "_", " ", "\n", ": ", "failed", "İ",
    ]
)  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_shared_searches_find_what_a_search_per_keyword_finds(text: str) -> None:
    assert salient_search.first_matches(text, 0, len(text)) == _one_search_per_keyword(text)


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "0", "No", "NO", "zero", "ZERO", "without", "WİTHOUT", "wıthout", "Without",
                " ", "\t", "errors", "Failures", "failed", "FAIL", "exceptions", ":", "=",
                "x", "ſ", "K", "İ", "1",
            ]
        ),
        max_size=12,
    ).map("".join)
)  # fmt: skip
def test_the_quick_look_lets_through_every_line_the_counts_of_nothing_match(line: str) -> None:
    assert salient._may_count_nothing(line) or salient._NOTHING.search(line) is None
