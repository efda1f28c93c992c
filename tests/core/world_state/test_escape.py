import pytest

from app.core.world_state import escape_text


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("a&b", "a&amp;b"),
        ("<tag>", "&lt;tag&gt;"),
        ("</user_project_context>", "&lt;/user_project_context&gt;"),
        ("line1\nline2", "line1\\nline2"),
        ("a\rb", "a\\rb"),
        ("tab\there", "tab\ufffdhere"),
        ("nul\x00", "nul\ufffd"),
        ("del\x7f", "del\ufffd"),
        ("c1\x85\x9f", "c1\ufffd\ufffd"),
        ("\x1b[31m", "\ufffd[31m"),
        ("plain-name_1.txt", "plain-name_1.txt"),
        ("unicode é 文件 \u2028", "unicode é 文件 \u2028"),
        ("&amp;", "&amp;amp;"),
    ],
)
def test_escape_text(raw: str, escaped: str) -> None:
    assert escape_text(raw) == escaped
