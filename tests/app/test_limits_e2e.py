"""Limits and faults over real HTTP, runtime and demo tools as processes on 127.0.0.1 (issue 16 item 4).

- Request bodies over the cap (default 1 MiB) are refused before they are read: on A2A a JSON-RPC error
  (-32600, HTTP 200, what a2a-sdk's client reads), on REST 413 ProblemDetails; nothing reaches the database.
- ``/readyz`` turns 503 ``DatabaseUnavailable`` when the sqlite file is removed or cannot be written.
- A state directory that cannot be used fails start-up with one line naming it and the cause, exit 2.

Tests run as root here, where permission bits stop nothing: an unusable state directory is made with what does
stop root (a file in its place, a read-only bind mount in a mount namespace of its own, ``chattr +i``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.utils.errors import InvalidRequestError

from agent_runtime.clients import a2a_client
from agent_runtime.rest.models import ProblemDetails
from tests.support.processes import free_port
from tests.support.runtime import RUNTIME_CMD, Rpc, RuntimeProcess, Tools, demo_tools, request_ids, runtime, write_manifests

pytestmark = pytest.mark.e2e

CAP = 1 << 20  # the default
LIMIT_WORDS = f"limit of {CAP} bytes"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Tools, RuntimeProcess]]:
    base = tmp_path_factory.mktemp("limits-e2e")
    with demo_tools(base / "tools") as tools, runtime(base / "rt", tools) as proc:
        yield tools, proc


@pytest.fixture
def proc(env: tuple[Tools, RuntimeProcess]) -> RuntimeProcess:
    return env[1]


@pytest.fixture
def rpc(proc: RuntimeProcess) -> Rpc:
    return Rpc(proc.url)


def _stored_bytes(state_dir: Path) -> int:
    return sum(f.stat().st_size for f in state_dir.iterdir() if f.name.startswith("gatehouse.db"))


def _send_body(text: str) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": "big", "method": "SendMessage", "params": {"message": message}}


def _sized(make: Any, size: int) -> bytes:
    """``make(padding)`` serialised, padded to exactly ``size`` bytes."""
    bare = len(json.dumps(make("")).encode())
    raw = json.dumps(make("x" * (size - bare))).encode()
    assert len(raw) == size
    return raw


def _chunks(size: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """A JSON string body of ``size`` bytes, sent chunked (a generator: httpx sends no Content-Length)."""
    yield b'"'
    left = size - 2
    while left > 0:
        yield b"x" * min(chunk, left)
        left -= chunk
    yield b'"'


def _rpc_error(reply: httpx.Response) -> dict[str, Any]:
    assert reply.status_code == 200, reply.text  # a2a-sdk's convention for JSON-RPC errors (agent_runtime/app/limits.py)
    body = reply.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    return dict(body["error"])


# --- request bodies: A2A ---------------------------------------------------------------------------------------------

def test_a_2_mib_a2a_message_is_a_json_rpc_error_and_stores_nothing(rpc: Rpc, proc: RuntimeProcess) -> None:
    rpc.send("hello")  # the database is open and written once
    before = _stored_bytes(proc.state_dir)
    reply = rpc.client.post("/", json=_send_body("x" * (2 << 20)))
    time.sleep(0.5)  # anything the message caused would have been written by now
    assert _stored_bytes(proc.state_dir) == before
    error = _rpc_error(reply)
    assert error["code"] == -32600 and LIMIT_WORDS in error["message"] and "--max-body-bytes" in error["message"], error


def test_a2a_sdk_clients_read_the_limit(proc: RuntimeProcess) -> None:
    async def send() -> None:
        async with a2a_client.connect(proc.url) as client:
            await a2a_client.send_text(client, "y" * (2 << 20))

    with pytest.raises(InvalidRequestError, match=LIMIT_WORDS):
        asyncio.run(send())


def test_an_a2a_body_of_exactly_the_cap_is_served(rpc: Rpc) -> None:
    reply = rpc.client.post("/", content=_sized(_send_body, CAP), headers={"content-type": "application/json"})
    assert reply.status_code == 200 and "result" in reply.json(), reply.text[:500]
    over = rpc.client.post("/", content=_sized(_send_body, CAP + 1), headers={"content-type": "application/json"})
    assert _rpc_error(over)["code"] == -32600


def test_a_chunked_a2a_body_is_counted_as_it_arrives(rpc: Rpc) -> None:
    error = _rpc_error(rpc.client.post("/", content=_chunks(2 << 20), headers={"content-type": "application/json"}))
    assert error["code"] == -32600 and LIMIT_WORDS in error["message"]
    small = json.dumps(_send_body("a chunked hello")).encode()
    reply = rpc.client.post("/", content=iter([small[:10], small[10:]]), headers={"content-type": "application/json"})
    assert reply.status_code == 200 and "result" in reply.json(), reply.text


# --- request bodies: REST --------------------------------------------------------------------------------------------

def _pending(rpc: Rpc, tools: Tools, name: str) -> str:
    (tools.sandbox / name).write_text("x")
    task = rpc.send(f"delete {name}")["task"]
    (request_id,) = request_ids(task)
    return request_id


def test_a_2_mib_rest_decision_is_413_and_decides_nothing(env: tuple[Tools, RuntimeProcess], rpc: Rpc) -> None:
    tools, proc = env
    request_id = _pending(rpc, tools, "rest-big.txt")
    url = f"{proc.url}/approvals/{request_id}/decision"
    body = {"decision": "approve", "reason": "r" * (2 << 20)}
    reply = httpx.post(url, json=body, headers={"Idempotency-Key": str(uuid.uuid4())})
    assert reply.status_code == 413
    problem = ProblemDetails.model_validate_json(reply.text)
    assert LIMIT_WORDS in problem.error and problem.approval is None
    chunked = httpx.post(url, content=_chunks(2 << 20), headers={"Idempotency-Key": str(uuid.uuid4())})
    assert chunked.status_code == 413 and LIMIT_WORDS in chunked.json()["error"]
    assert httpx.get(f"{proc.url}/approvals/{request_id}").json()["status"] == "pending"
    assert (tools.sandbox / "rest-big.txt").exists()


def test_a_rest_decision_of_exactly_the_cap_is_served(env: tuple[Tools, RuntimeProcess], rpc: Rpc) -> None:
    tools, proc = env
    request_id = _pending(rpc, tools, "rest-cap.txt")
    raw = _sized(lambda pad: {"decision": "deny", "reason": pad}, CAP)
    reply = httpx.post(f"{proc.url}/approvals/{request_id}/decision", content=raw,
                       headers={"Idempotency-Key": str(uuid.uuid4()), "content-type": "application/json"})
    assert reply.status_code == 200, reply.text[:500]
    assert reply.json()["approval"]["status"] == "denied"


# --- request bodies: refused before they are read -------------------------------------------------------------------

def _raw_exchange(port: int, head: bytes, body: bytes = b"", timeout: float = 5.0) -> bytes:
    """Send ``head`` and ``body`` (not the rest the head announces) and read the answer, which must come anyway."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head + body)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
            chunk = sock.recv(65536)
            assert chunk, f"the connection closed before the answer was read: {answer!r}"
            answer += chunk
    return answer


def _length(answer: bytes) -> int:
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


@pytest.mark.parametrize("path", ["/", "/approvals/apr-none/decision"])
def test_a_content_length_over_the_cap_is_answered_before_any_body_arrives(proc: RuntimeProcess, path: str) -> None:
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\n"
            f"Idempotency-Key: k\r\nContent-Length: {20 << 20}\r\n\r\n").encode()
    started = time.monotonic()
    answer = _raw_exchange(proc.port, head)  # not one byte of the 20 MB sent
    assert time.monotonic() - started < 3.0
    status = b"200" if path == "/" else b"413"
    assert answer.startswith(b"HTTP/1.1 " + status) and LIMIT_WORDS.encode() in answer, answer[:300]


def test_a_chunked_body_is_cut_off_at_the_cap(proc: RuntimeProcess) -> None:
    head = (b"POST /approvals/apr-none/decision HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Idempotency-Key: k\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = 64 * 1024
    chunks = b"".join(b"%x\r\n%s\r\n" % (piece, b"z" * piece) for _ in range(CAP // piece + 2))  # just over; no end
    answer = _raw_exchange(proc.port, head, chunks)  # the last chunk never comes: answered all the same
    assert answer.startswith(b"HTTP/1.1 413") and LIMIT_WORDS.encode() in answer, answer[:300]


def test_the_cap_is_settable(env: tuple[Tools, RuntimeProcess], tmp_path: Path) -> None:
    tools, _ = env
    proc = RuntimeProcess(write_manifests(tmp_path / "m", tools.url), tmp_path / "state", tmp_path / "runtime.log",
                          serve_args=["--max-body-bytes", "2000"])
    proc.start()
    try:
        rpc = Rpc(proc.url)
        error = _rpc_error(rpc.client.post("/", json=_send_body("x" * 2000)))
        assert "limit of 2000 bytes" in error["message"]
        assert "result" in rpc.client.post("/", json=_send_body("small")).json()
    finally:
        proc.stop()


# --- /readyz: the database file ------------------------------------------------------------------------------------

@pytest.fixture
def own_runtime(env: tuple[Tools, RuntimeProcess], tmp_path: Path) -> Iterator[tuple[RuntimeProcess, Rpc]]:
    """A runtime of its own (these tests break its database)."""
    with runtime(tmp_path / "rt", env[0]) as proc:
        yield proc, Rpc(proc.url)


def _readyz(proc: RuntimeProcess) -> httpx.Response:
    return httpx.get(f"{proc.url}/readyz", timeout=5)


def test_a_removed_database_turns_readyz_503_with_the_reason(
    env: tuple[Tools, RuntimeProcess], own_runtime: tuple[RuntimeProcess, Rpc]
) -> None:
    proc, rpc = own_runtime
    _pending(rpc, env[0], "kept.txt")  # what a restart would lose
    assert _readyz(proc).status_code == 200
    database = proc.state_dir / "gatehouse.db"
    for file in proc.state_dir.glob("gatehouse.db*"):
        file.unlink()
    probe = _readyz(proc)
    assert probe.status_code == 503, probe.text
    body = probe.json()
    assert (body["status"], body["reason"]) == ("unavailable", "DatabaseUnavailable")
    assert body["problems"] == [
        f"the database file {database} was removed or replaced: pending approvals would be lost; restart the runtime"
    ]
    assert httpx.get(f"{proc.url}/healthz").status_code == 200  # alive: only not to be sent traffic


def test_a_database_that_cannot_be_written_turns_readyz_503_until_it_can(own_runtime: tuple[RuntimeProcess, Rpc]) -> None:
    proc, _ = own_runtime
    database = proc.state_dir / "gatehouse.db"
    with _unwritable(database):
        probe = _readyz(proc)
        assert probe.status_code == 503 and probe.json()["reason"] == "DatabaseUnavailable", probe.text
        assert probe.json()["problems"] == [
            f"the database file {database} cannot be written (not writable by the runtime): approvals and decisions would fail"
        ]
    assert _readyz(proc).status_code == 200


@contextlib.contextmanager
def _unwritable(path: Path) -> Iterator[None]:
    """Root: ``chattr +i`` (permission bits do not stop root); anyone else: ``chmod a-w``."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip(f"chattr +i is not available on {path}'s file system")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


# --- start-up: the state directory ---------------------------------------------------------------------------------

def _serve(tmp_path: Path, state_dir: Path, wrap: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    files = write_manifests(tmp_path / "m", f"http://127.0.0.1:{free_port()}/mcp")  # never reached
    args = [*RUNTIME_CMD, "serve", "--port", str(free_port()), "--state-dir", str(state_dir)]
    for f in files:
        args += ["-f", str(f)]
    return subprocess.run([*(wrap or []), *args], capture_output=True, text=True, timeout=120)


def _assert_one_line(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.splitlines() == [expected], done.stderr[-3000:]


def test_a_file_where_the_state_directory_should_be_fails_start_up_in_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.write_text("not a directory")
    _assert_one_line(_serve(tmp_path, state), f"error: the state directory {state} is not a directory (a file is in its place)")
    below = state / "sub"
    _assert_one_line(_serve(tmp_path, below), f"error: the state directory {below} cannot be created: Not a directory")


def test_a_read_only_state_directory_fails_start_up_in_one_line(tmp_path: Path) -> None:
    """A read-only bind mount in a mount namespace of the runtime's own (``unshare -m``): EROFS even for root."""
    state = tmp_path / "state"
    state.mkdir()
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("unshare -m (a mount namespace) is not permitted here")
    wrap = ["unshare", "-m", "sh", "-c", f'mount --bind -o ro "{state}" "{state}" && exec "$@"', "sh"]
    expected = f"error: the state directory {state} cannot be written: Read-only file system"
    _assert_one_line(_serve(tmp_path, state, wrap), expected)


def test_an_immutable_state_directory_fails_start_up_in_one_line(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with _unwritable(state):
        done = _serve(tmp_path, state)
    cause = "Operation not permitted" if os.geteuid() == 0 else "Permission denied"
    _assert_one_line(done, f"error: the state directory {state} cannot be written: {cause}")
