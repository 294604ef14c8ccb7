from __future__ import annotations

import pytest

# The throwaway PostgreSQL server (session) and a fresh database per test: see tests/support/postgres.py.
from tests.support.postgres import postgres_database_url, postgres_server, replicas

__all__ = ["postgres_database_url", "postgres_server", "replicas", "update_golden"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files (tests/testdata/**/expected*.json) from the current output",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))
