"""The workspace check remembers what each loaded row passed with, and nothing more: a value put
on the same row afterwards is checked again."""

from __future__ import annotations

import pytest

from app.core.errors import Conflict
from app.services.session_config import workspace_of
from app.storage.models import AgentSession

SHOWN = {"working_directory": "/shown"}


def test_a_value_replaced_after_the_check_is_checked_again() -> None:
    row = AgentSession(id="ses-1", workspace={"provided": {**SHOWN, "layout": ["src/"]}})
    assert workspace_of(row) == {"provided": {**SHOWN, "layout": ["src/"]}}

    row.workspace = {"provided": {**SHOWN, "layout": ["src/", 3]}}

    with pytest.raises(Conflict) as refused:
        workspace_of(row)
    assert refused.value.code == "session_config_invalid"
    assert refused.value.extra["field"] == "workspace.provided.layout"


def test_a_layout_is_checked_to_its_last_entry() -> None:
    layout: list[object] = [f"src/file_{i}.py" for i in range(100_000)]
    assert workspace_of(
        AgentSession(id="ses-2", workspace={"provided": {**SHOWN, "layout": layout}})
    )
    layout.append(None)
    with pytest.raises(Conflict):
        workspace_of(AgentSession(id="ses-3", workspace={"provided": {**SHOWN, "layout": layout}}))
