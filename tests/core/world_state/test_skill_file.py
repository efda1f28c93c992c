import pytest

from app.core.world_state import (
    SkillFileError,
    is_valid_skill_name,
    parse_skill_file,
    skill_instruction_item,
    skill_instruction_text,
    strip_front_matter,
)


@pytest.mark.parametrize("name", ["a", "pdf", "pdf-tools", "a1-b2", "9", "x" * 64, "a--b"])
def test_valid_skill_names(name: str) -> None:
    assert is_valid_skill_name(name)


@pytest.mark.parametrize(
    "name",
    ["", "x" * 65, "-a", "a-", "Pdf", "a_b", "a.b", "..", ".hidden", "a/b", "é", "a b", "a\n"],
)
def test_invalid_skill_names(name: str) -> None:
    assert not is_valid_skill_name(name)


def test_parse_plain_front_matter_and_body() -> None:
    parsed = parse_skill_file(
        "pdf",
        "---\nname: pdf\ndescription: Read   PDF\n  files   well.\nlicense: MIT\n---\n"
        "\n# PDF\nUse it.\n",
    )
    assert (parsed.name, parsed.description, parsed.body) == (
        "pdf",
        "Read PDF files well.",
        "# PDF\nUse it.",
    )


def test_name_defaults_to_the_directory() -> None:
    assert parse_skill_file("pdf", "---\ndescription: d\n---\nbody").name == "pdf"


def test_name_mismatch_is_refused() -> None:
    with pytest.raises(SkillFileError, match="differs"):
        parse_skill_file("pdf", "---\nname: other\ndescription: d\n---\n")


@pytest.mark.parametrize(
    "text",
    [
        "no front matter",
        "---\nname: pdf\n---\nbody",
        "---\ndescription:\n---\n",
        "---\ndescription: '   '\n---\n",
        "---\ndescription:\n  nested: map\n---\n",
    ],
)
def test_description_is_required(text: str) -> None:
    with pytest.raises(SkillFileError):
        parse_skill_file("pdf", text)


@pytest.mark.parametrize(
    "text",
    [
        "---\ndescription: d\n",  # never closed
        "---\ndescription: 'open\n---\n",  # quote never closed
        "---\ndescription: d\ndescription: e\n---\n",  # duplicate key
        "---\n  indented: first\n---\n",
        "---\njust text\n---\n",
    ],
)
def test_malformed_front_matter(text: str) -> None:
    with pytest.raises(SkillFileError):
        parse_skill_file("pdf", text)


@pytest.mark.parametrize(
    ("raw", "description"),
    [
        ('description: "Say \\"hi\\"\\tnow"', 'Say "hi" now'),
        ("description: 'It''s fine'", "It's fine"),
        ("description: >\n  Folded\n  text\n\n  more", "Folded text more"),
        ("description: |-\n  Literal\n    indented", "Literal indented"),
        ("description: plain # a comment", "plain"),
        ("description: Use when: a colon appears", "Use when: a colon appears"),
        ('description: "multi\n  line"', "multi line"),
    ],
)
def test_description_forms(raw: str, description: str) -> None:
    text = f"---\nname: pdf\n{raw}\nmetadata:\n  version: 2\n  tags:\n    - a\n---\nbody"
    assert parse_skill_file("pdf", text).description == description


def test_description_collapsed_and_cut_to_1024() -> None:
    text = "---\ndescription: " + "word " * 400 + "\n---\n"
    description = parse_skill_file("pdf", text).description
    assert len(description) == 1024
    assert "  " not in description


def test_bom_and_crlf_front_matter() -> None:
    parsed = parse_skill_file("pdf", "\ufeff---\r\nname: pdf\r\ndescription: d\r\n---\r\nBody\r\n")
    assert (parsed.description, parsed.body) == ("d", "Body")


def test_strip_front_matter_keeps_inner_text_verbatim() -> None:
    assert strip_front_matter("---\na: b\n---\n\n  x\n\n  y  \n\n") == "  x\n\n  y  "
    assert strip_front_matter("no front matter\n") == "no front matter"
    assert strip_front_matter("---\nunclosed\n") == "---\nunclosed"


def test_skill_instruction_text_and_item() -> None:
    expected = "<skill>\n<name>pdf</name>\n<path>/s/pdf/SKILL.md</path>\n# PDF\nUse it.\n</skill>"
    assert skill_instruction_text("pdf", "/s/pdf/SKILL.md", "# PDF\nUse it.") == expected
    item = skill_instruction_item("pdf", "/s/pdf/SKILL.md", "# PDF\nUse it.")
    assert (item.role, item.kind) == ("user", "skill_instruction")
    assert item.content == [{"type": "text", "text": expected}]
    assert not item.is_user_request
