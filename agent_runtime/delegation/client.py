"""The A2A client a parent agent uses to call a sub-agent: its own credentials, one request at a time, blocking.

The sub-agent answers every request with its task (a Gatehouse runtime runs a turn to its end or its pause within
the request); :class:`ChildStatus` is what the parent reads of it. The bearer token is read on every request (a
projected ServiceAccount token is rotated on disk; a Secret's value arrives as an environment variable).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts
from a2a.types import CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from agent_runtime.contract.agent_config import SubAgentConfig
from agent_runtime.contract.translator import AGENT_TOKEN_AUDIENCE
from agent_runtime.delegation.store import Pause

CARD_SUFFIXES = ("agent-card.json", "agent.json")


class SubAgentUnreachable(RuntimeError):
    """The sub-agent could not be asked (no card, refused connection, a credential missing, an HTTP error)."""


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` → ``input-required``."""
    return TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-")


@dataclass(frozen=True)
class ChildStatus:
    task_id: str
    context_id: str
    state: str  # a2a spelling: completed, input-required, failed…
    text: str
    pause: Pause  # the status message's data parts and metadata (a pause: what it waits for)

    @property
    def paused(self) -> bool:
        return self.state == "input-required"

    @property
    def finished(self) -> bool:
        return self.state in ("completed", "failed", "canceled", "rejected")

    @classmethod
    def of(cls, task: Task) -> ChildStatus:
        message = task.status.message if task.status.HasField("message") else None
        text = "\n".join(get_text_parts(message.parts)) if message is not None else ""
        if not text:
            text = "\n".join(t for a in task.artifacts if (t := "\n".join(get_text_parts(a.parts))))
        data = [d for d in get_data_parts(message.parts) if isinstance(d, dict)] if message is not None else []
        metadata = MessageToDict(message.metadata) if message is not None else {}
        return cls(task.id, task.context_id, state_name(task.status.state), text, Pause(text, data, metadata))


class _Bearer(httpx.Auth):
    """The parent's own credential, read on every request."""

    def __init__(self, config: SubAgentConfig, env: Mapping[str, str]) -> None:
        self._config = config
        self._env = env

    def token(self) -> str | None:
        config = self._config
        if config.token is not None:
            value = self._env.get(config.token.env)
            if not value:
                raise SubAgentUnreachable(
                    f"the credentials for {config.agent} are missing: environment variable {config.token.env} (from "
                    f"Secret {config.token.secret!r}, key {config.token.key!r}) is not set")
            return value.strip()
        if config.token_file is not None:
            try:
                token = Path(config.token_file).read_text().strip()
            except OSError as exc:
                raise SubAgentUnreachable(f"the credentials for {config.agent} could not be read from "
                                          f"{config.token_file}: {exc.strerror or exc}") from exc
            audiences = token_audiences(token)
            if audiences is not None and AGENT_TOKEN_AUDIENCE not in audiences:
                # A ServiceAccount token for the API server would let the other agent act as this one there.
                raise SubAgentUnreachable(
                    f"not sending {config.token_file} to {config.agent}: the token is for {sorted(audiences)}, not for "
                    f"agents ({AGENT_TOKEN_AUDIENCE}); an API-server token is never sent to another agent")
            return token
        return None

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self.token()
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request


def token_audiences(token: str) -> list[str] | None:
    """The ``aud`` of a JWT (read, not verified: only to refuse sending it where it does not belong); ``None`` for a
    token that is not a JWT or names no audience."""
    try:
        aud = jwt.decode(token, options={"verify_signature": False}).get("aud")
    except (jwt.PyJWTError, ValueError):
        return None
    if isinstance(aud, str):
        return [aud]
    if isinstance(aud, list) and all(isinstance(a, str) for a in aud):
        return list(aud)
    return None


class SubAgentClient:
    def __init__(self, config: SubAgentConfig, env: Mapping[str, str] | None = None) -> None:
        self.config = config
        self._http = httpx.AsyncClient(timeout=config.timeout_seconds, auth=_Bearer(config, env or os.environ))
        self._client: Client | None = None

    async def _connect(self) -> Client:
        if self._client is None:
            parts = urlsplit(self.config.card_url)
            base, card_path = self.config.card_url, None
            if parts.path.endswith(CARD_SUFFIXES):
                base, card_path = f"{parts.scheme}://{parts.netloc}/", parts.path
            factory = ClientFactory(ClientConfig(streaming=False, httpx_client=self._http))
            try:
                self._client = await factory.create_from_url(base, relative_card_path=card_path)
            except SubAgentUnreachable:
                raise
            except Exception as exc:
                raise SubAgentUnreachable(f"the agent card of {self.config.agent} could not be read from "
                                          f"{self.config.card_url}: {exc}") from exc
        return self._client

    async def send(
        self, parts: list[Part], metadata: dict[str, Any], *, task_id: str = "", context_id: str = "",
    ) -> ChildStatus:
        """One message (a new task, or one more message to ``task_id``); its task as it is after the request."""
        client = await self._connect()
        message = Message(role=Role.ROLE_USER, parts=parts, message_id=str(uuid.uuid4()), task_id=task_id,
                          context_id=context_id)
        message.metadata.update(metadata)
        task: Task | None = None
        try:
            async for event in client.send_message(SendMessageRequest(message=message)):
                if event.HasField("task"):
                    task = event.task
                elif event.HasField("message"):
                    text = "\n".join(get_text_parts(event.message.parts))
                    return ChildStatus(task_id, event.message.context_id or context_id, "message", text, Pause(text))
        except UnsupportedOperationError:
            if not task_id:
                raise SubAgentUnreachable(f"{self.config.agent} refused the request") from None
            return await self.get(task_id)  # finished meanwhile: what it ended with
        except SubAgentUnreachable:
            raise
        except Exception as exc:
            raise SubAgentUnreachable(f"{self.config.agent} could not be reached: {type(exc).__name__}: {exc}") from exc
        if task is None:
            raise SubAgentUnreachable(f"{self.config.agent} answered without a task")
        return ChildStatus.of(task)

    async def get(self, task_id: str) -> ChildStatus:
        client = await self._connect()
        try:
            return ChildStatus.of(await client.get_task(GetTaskRequest(id=task_id)))
        except Exception as exc:
            raise SubAgentUnreachable(f"task {task_id} of {self.config.agent} could not be read: {exc}") from exc

    async def cancel(self, task_id: str) -> None:
        client = await self._connect()
        try:
            await client.cancel_task(CancelTaskRequest(id=task_id))
        except Exception as exc:
            raise SubAgentUnreachable(f"task {task_id} of {self.config.agent} could not be canceled: {exc}") from exc

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
        await self._http.aclose()


__all__ = ["ChildStatus", "SubAgentClient", "SubAgentUnreachable", "state_name", "token_audiences"]
