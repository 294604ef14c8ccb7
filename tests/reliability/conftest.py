"""One demo-tools server and one runtime (sqlite state dir) shared by a module's tests: a runtime start costs
seconds, and these tests only ever add conversations of their own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.runtime import RuntimeProcess, Tools, demo_tools, write_manifests


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    base = tmp_path_factory.mktemp("served")
    with demo_tools(base / "tools") as tools:
        proc = RuntimeProcess(write_manifests(base / "m", tools.url), base / "state", base / "runtime.log")
        proc.start()
        try:
            yield tools, proc
        finally:
            proc.stop()
