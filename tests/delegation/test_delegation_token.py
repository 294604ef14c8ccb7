"""The credential a parent presents to an Agent of its namespace: the token projected for agents, never a token for
the API server (agent_runtime/delegation/client.py)."""

from __future__ import annotations

from pathlib import Path

import httpx
import jwt
import pytest

from agent_runtime.contract.agent_config import SubAgentConfig
from agent_runtime.contract.translator import AGENT_TOKEN_AUDIENCE
from agent_runtime.delegation.client import SubAgentUnreachable, _Bearer, token_audiences


def _token(aud: str | list[str]) -> str:
    return jwt.encode({"sub": "system:serviceaccount:team:orchestrator", "aud": aud}, "k" * 32, algorithm="HS256")


def _bearer(tmp_path: Path, token: str) -> _Bearer:
    (tmp_path / "token").write_text(token + "\n")
    config = SubAgentConfig(name="files", agent="team/files", card_url="http://files/", token_file=str(tmp_path / "token"))
    return _Bearer(config, {})


def test_the_token_for_agents_is_sent(tmp_path: Path) -> None:
    token = _token([AGENT_TOKEN_AUDIENCE])
    request = next(_bearer(tmp_path, token).auth_flow(httpx.Request("POST", "http://files/")))
    assert request.headers["Authorization"] == f"Bearer {token}"


def test_a_token_for_the_api_server_is_never_sent(tmp_path: Path) -> None:
    bearer = _bearer(tmp_path, _token(["https://kubernetes.default.svc.cluster.local"]))
    with pytest.raises(SubAgentUnreachable, match="an API-server token is never sent to another agent"):
        next(bearer.auth_flow(httpx.Request("POST", "http://files/")))


def test_audiences_of_what_is_not_a_jwt_are_unknown() -> None:
    assert token_audiences("opaque-token") is None
    assert token_audiences(_token("one")) == ["one"]
