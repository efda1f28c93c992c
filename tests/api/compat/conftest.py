"""A real ``uvicorn`` of the app in front of the loopback fake provider (Chat Completions with
OpenAI's automatic prompt cache, ``tests.providers.fake_chat_cache``), shared by a module's
end-to-end tests of the drop-in endpoints."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.compat.e2e import KEY_ENV
from tests.providers.fake_chat_cache import ScriptedChat
from tests.providers.fakes import FakeProviderServer
from tests.servers import ServerProcess, one_server


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeProviderServer, ScriptedChat]]:
    script = ScriptedChat()
    with FakeProviderServer(responder=script) as server:
        yield server, script


@pytest.fixture(scope="module")
def server(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("compat-e2e")
    shutil.copyfile(sqlite_template, tmp / "ctxsvc.db")
    with one_server(
        f"sqlite+aiosqlite:///{tmp / 'ctxsvc.db'}",
        tmp,
        proxy_summary_model="local",
        **{KEY_ENV.removeprefix("CTXSVC_").lower(): "sk-test"},
    ) as process:
        yield process
