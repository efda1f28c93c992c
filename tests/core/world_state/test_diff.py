from dataclasses import replace

import pytest

from app.core.content import Item, RealOrigin, text_block
from app.core.world_state import (
    AGENTS_MD,
    PINNED_CONTEXT,
    PROJECT_CONTEXT,
    SANDBOX_POLICY,
    SECTION_IDS,
    SKILLS_CATALOG,
    RenderedSection,
    SandboxSettings,
    SectionMessage,
    SkillEntry,
    WorkspaceInputs,
    advance_baselines,
    diff_sections,
    render_sections,
    retained_sections,
    world_state_item,
    world_state_message_id,
)
from app.core.world_state.sections import section_spec

NOTICES = {
    PROJECT_CONTEXT: (
        "The project context below replaces the previously provided project context.",
        "The previously provided project context no longer applies.",
    ),
    AGENTS_MD: (
        "The AGENTS.md instructions below replace all previously provided AGENTS.md instructions.",
        "The previously provided AGENTS.md instructions no longer apply.",
    ),
    SKILLS_CATALOG: (
        "The skill catalog below replaces the previous one.",
        "The previous skill catalog no longer applies; no skills are available now.",
    ),
    SANDBOX_POLICY: (
        "The sandbox policy below replaces the previous one.",
        "The previous sandbox policy no longer applies.",
    ),
    PINNED_CONTEXT: (
        "The pinned items below replace all previously pinned items.",
        "The previously pinned items no longer apply; nothing is pinned now.",
    ),
}
NO_BASELINE = object()


def body(section_id: str, version: str) -> str:
    return f"{section_spec(section_id).open_tag} {version}"


def text_of(item: Item) -> str:
    block = item.content[0]
    assert block["type"] == "text"
    return block["text"]


def user(text: str, kind: str = "normal") -> Item:
    return Item(role="user", kind=kind, content=[text_block(text)])  # type: ignore[arg-type]


# (baseline, retained item text, current body) → expected message ("" = nothing).
# "old"/"new" stand for bodies; None for an absent body or a known-absent baseline.
ROWS = [
    pytest.param("old", "old", "old", "", id="same-retained-present"),
    pytest.param("old", "old", "new", "replace:new", id="different-retained-present"),
    pytest.param("old", "old", None, "removal", id="different-retained-absent"),
    pytest.param(None, "removal", None, "", id="known-absent-retained-absent"),
    pytest.param(None, "removal", "new", "replace:new", id="known-absent-retained-present"),
    pytest.param("old", None, "old", "new:old", id="same-compacted-present"),
    pytest.param("old", None, "new", "new:new", id="different-compacted-present"),
    pytest.param("old", None, None, "", id="any-compacted-absent"),
    pytest.param(None, None, "new", "new:new", id="known-absent-compacted-present"),
    pytest.param(NO_BASELINE, "old", "new", "replace:new", id="none-retained-present"),
    pytest.param(NO_BASELINE, "old", "old", "replace:old", id="none-retained-same-body"),
    pytest.param(NO_BASELINE, "old", None, "removal", id="none-retained-absent"),
    pytest.param(NO_BASELINE, None, "new", "new:new", id="none-not-retained-present"),
    pytest.param(NO_BASELINE, None, None, "", id="none-not-retained-absent"),
]


@pytest.mark.parametrize("section_id", SECTION_IDS)
@pytest.mark.parametrize(("baseline", "retained", "current", "expected"), ROWS)
def test_diff_table(
    section_id: str, baseline: object, retained: str | None, current: str | None, expected: str
) -> None:
    replacement, removal = NOTICES[section_id]
    baselines: dict[str, str | None] = {}
    if baseline is not NO_BASELINE:
        baselines[section_id] = None if baseline is None else body(section_id, str(baseline))
    conversation = [user("hello")]
    if retained == "removal":
        conversation.append(world_state_item(removal))
    elif retained is not None:
        conversation.append(world_state_item(body(section_id, retained)))
    current_body = None if current is None else body(section_id, current)

    messages = diff_sections([RenderedSection(section_id, current_body)], baselines, conversation)

    if not expected:
        assert messages == []
        return
    assert len(messages) == 1
    message = messages[0]
    assert message.section_id == section_id
    assert message.body == current_body
    if expected == "removal":
        assert message.text == removal
    elif expected.startswith("replace:"):
        assert message.text == f"{replacement}\n\n{body(section_id, expected[8:])}"
    else:
        assert message.text == body(section_id, expected[4:])


@pytest.mark.parametrize("section_id", SECTION_IDS)
def test_retained_forms(section_id: str) -> None:
    replacement, removal = NOTICES[section_id]
    open_tag = section_spec(section_id).open_tag
    for text in (f"{open_tag}x", f"{replacement}\n\n{open_tag}x", removal):
        assert retained_sections([world_state_item(text)]) == {section_id}
    for text in (f" {open_tag}", f"{replacement}\n{open_tag}", f"{removal} ", f"{replacement}"):
        assert retained_sections([world_state_item(text)]) == frozenset()


@pytest.mark.parametrize("kind", ["normal", "skill_instruction", "agent_message"])
def test_the_same_text_outside_world_state_is_not_retained(kind: str) -> None:
    texts = [body(s, "x") for s in SECTION_IDS] + [n for pair in NOTICES.values() for n in pair]
    assert retained_sections([user(t, kind) for t in texts]) == frozenset()


# --- whole samplings ---------------------------------------------------------------------

SANDBOX = SandboxSettings("auto", True)
INPUTS = WorkspaceInputs(
    working_directory="/w",
    layout=("src/",),
    agents_md="Be nice.",
    skills=(SkillEntry("alpha", "First.", "/s/alpha/SKILL.md"),),
)


class Session:
    """What the sampling service does: diff, store, append, then advance the baselines."""

    def __init__(self) -> None:
        self.conversation: list[Item] = [user("please help")]
        self.baselines: dict[str, str | None] = {}

    def sample(self, inputs: WorkspaceInputs, sandbox: SandboxSettings = SANDBOX) -> list[str]:
        messages = diff_sections(
            render_sections(inputs, sandbox), self.baselines, self.conversation
        )
        self.conversation.extend(world_state_item(m.text) for m in messages)
        self.baselines = advance_baselines(self.baselines, messages)
        return [m.section_id for m in messages]


def test_first_sampling_emits_every_present_section_in_order_without_notices() -> None:
    session = Session()
    assert session.sample(INPUTS) == [PROJECT_CONTEXT, AGENTS_MD, SKILLS_CATALOG, SANDBOX_POLICY]
    texts = [text_of(item) for item in session.conversation[1:]]
    assert [t.split("\n", 1)[0] for t in texts] == [
        '<user_project_context format_version="1">',
        "<project_instructions>",
        "<available_skills>",
        "<sandbox_policy>",
    ]


def test_first_sampling_skips_absent_sections() -> None:
    session = Session()
    assert session.sample(WorkspaceInputs()) == [SANDBOX_POLICY]


def test_unchanged_world_emits_nothing() -> None:
    session = Session()
    session.sample(INPUTS)
    assert session.sample(INPUTS) == []
    assert session.sample(INPUTS) == []


def test_agents_md_edit_sends_one_replacement() -> None:
    session = Session()
    session.sample(INPUTS)
    assert session.sample(replace(INPUTS, agents_md="Be brief.")) == [AGENTS_MD]
    assert session.conversation[-1].content[0] == text_block(
        f"{NOTICES[AGENTS_MD][0]}\n\n<project_instructions>\nBe brief.\n</project_instructions>"
    )
    assert session.sample(replace(INPUTS, agents_md="Be brief.")) == []


def test_agents_md_removal_sends_the_notice_once_and_a_return_replaces_it() -> None:
    session = Session()
    session.sample(INPUTS)
    assert session.sample(replace(INPUTS, agents_md=None)) == [AGENTS_MD]
    assert session.conversation[-1].content[0] == text_block(NOTICES[AGENTS_MD][1])
    assert session.sample(replace(INPUTS, agents_md="  \n")) == []
    assert session.sample(INPUTS) == [AGENTS_MD]
    assert text_of(session.conversation[-1]).startswith(NOTICES[AGENTS_MD][0])


def test_sandbox_change_replaces_the_policy() -> None:
    session = Session()
    session.sample(INPUTS)
    assert session.sample(INPUTS, SandboxSettings("auto", False)) == [SANDBOX_POLICY]


def test_disabling_every_skill_removes_the_catalog() -> None:
    session = Session()
    session.sample(INPUTS)
    messages = diff_sections(
        render_sections(INPUTS, SANDBOX, {"alpha"}), session.baselines, session.conversation
    )
    assert [(m.section_id, m.text) for m in messages] == [
        (SKILLS_CATALOG, NOTICES[SKILLS_CATALOG][1])
    ]


def test_compacted_away_sections_reappear_without_notice() -> None:
    session = Session()
    session.sample(INPUTS)
    session.conversation = [user("summary and replay")]  # compaction dropped World State
    assert session.sample(INPUTS) == [PROJECT_CONTEXT, AGENTS_MD, SKILLS_CATALOG, SANDBOX_POLICY]
    texts = [text_of(item) for item in session.conversation[1:]]
    assert all(t.startswith("<") for t in texts)


def test_restart_with_lost_baselines_resends_retained_sections_with_notices() -> None:
    session = Session()
    session.sample(INPUTS)
    session.baselines = {}
    assert session.sample(replace(INPUTS, agents_md=None)) == [
        PROJECT_CONTEXT,
        AGENTS_MD,
        SKILLS_CATALOG,
        SANDBOX_POLICY,
    ]
    texts = [text_of(item) for item in session.conversation[-4:]]
    assert texts[0].startswith(NOTICES[PROJECT_CONTEXT][0] + "\n\n<user_project_context")
    assert texts[1] == NOTICES[AGENTS_MD][1]
    assert session.sample(replace(INPUTS, agents_md=None)) == []


def test_user_typed_markers_do_not_count_as_retained() -> None:
    session = Session()
    rendered = render_sections(INPUTS, SANDBOX)
    session.conversation.extend(user(s.body or "") for s in rendered)
    session.sample(INPUTS)
    texts = [text_of(item) for item in session.conversation[-4:]]
    assert texts == [s.body for s in rendered]  # first appearance: no replacement notice


def test_diff_is_read_only() -> None:
    baselines: dict[str, str | None] = {AGENTS_MD: "old"}
    conversation = [world_state_item("<project_instructions>\nold\n</project_instructions>")]
    diff_sections(render_sections(INPUTS, SANDBOX), baselines, conversation)
    assert baselines == {AGENTS_MD: "old"}
    assert len(conversation) == 1


def test_advance_baselines_only_touches_written_sections() -> None:
    before: dict[str, str | None] = {AGENTS_MD: "a", SKILLS_CATALOG: "c"}
    written = [SectionMessage(AGENTS_MD, "removal", None), SectionMessage(SANDBOX_POLICY, "p", "p")]
    after = advance_baselines(before, written)
    assert after == {AGENTS_MD: None, SKILLS_CATALOG: "c", SANDBOX_POLICY: "p"}
    assert before == {AGENTS_MD: "a", SKILLS_CATALOG: "c"}


def test_message_id_and_item_shape() -> None:
    assert world_state_message_id("t1", 3, 2, AGENTS_MD) == "world-state:t1:3:2:project/AGENTS.md"
    item = world_state_item("text", RealOrigin("m1", 7))
    assert (item.role, item.kind, item.content) == ("user", "world_state", [text_block("text")])
    assert item.origin == RealOrigin("m1", 7)
    assert not item.is_user_request
