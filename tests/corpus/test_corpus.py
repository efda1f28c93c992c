"""The stored-session paths send what the recorded corpus says, byte for byte (``record``).

Each session of the corpus is compared on its own, output by output, so a failure names the
first call that differs (an inspection, a session prepare, or a turn's model request)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.corpus.record import CORPUS, record_all

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[dict[str, Any]]]:
    return dict(json.loads(CORPUS.read_text()))


async def test_every_recorded_output_is_sent_again_unchanged(
    recorded: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    replayed = await record_all(tmp_path / "corpus.db")
    assert sorted(replayed) == sorted(recorded)
    for name, outputs in recorded.items():
        again = replayed[name]
        assert len(again) == len(outputs), name
        for index, (was, now) in enumerate(zip(outputs, again, strict=True)):
            # Through JSON, as recorded (tuples become lists).
            assert json.loads(json.dumps(now)) == was, f"{name}: output {index} ({next(iter(was))})"
