"""Webhook signing, naming and delivery: the scheme pinned byte for byte, the documented receiver held to the
same refusals as :func:`agent_runtime.rest.signing.verify`, and deliveries to a real HTTP server (retries,
dead letters, logs that never show a URL's path)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import logging
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.approvals import ApprovalRecord
from agent_runtime.approvals.events import ApprovalEvent
from agent_runtime.infra.database import Database
from agent_runtime.rest import signing
from agent_runtime.rest.settings import RestSettings, load_rest_settings, webhook_name
from agent_runtime.rest.webhooks import Webhooks
from agent_runtime.telemetry.metrics import Metrics
from tests.support.processes import free_port
from tests.support.webhook_receiver import Delivery, webhook_receiver

SECRET = b"whsec-for-tests"
T = 1_700_000_000
BODY = b'{"event":"decided","approval":{"id":"apr-1"}}'
DOCS = Path(__file__).parents[2] / "docs" / "rest.md"

Verifier = Callable[[bytes, Mapping[str, str], bytes, float], bool]


def _package(secret: bytes, headers: Mapping[str, str], body: bytes, now: float) -> bool:
    try:
        signing.verify(secret, headers, body, now=now)
    except signing.SignatureError:
        return False
    return True


def _documented(secret: bytes, headers: Mapping[str, str], body: bytes, now: float) -> bool:
    """The snippet in docs/rest.md, run as written, its clock set to ``now``."""
    (code,) = re.findall(r"```python\n(import hashlib, hmac, time\n.*?)```", DOCS.read_text(), re.S)
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    namespace["time"] = type("Clock", (), {"time": staticmethod(lambda: now)})
    return bool(namespace["verified"](secret, _Headers(headers), body))


class _Headers(dict[str, str]):
    """Like a web framework's request headers: names case-insensitive, values as received."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        super().__init__((k.lower(), v) for k, v in headers.items())

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(name.lower(), default)


def _signed(t: int = T, delivery: str = "0b6c1d9e-5f0a-4c3b-9d2e-7a8b9c0d1e2f", event: str = "decided") -> dict[str, str]:
    return signing.sign(SECRET, BODY, delivery=delivery, event=event, timestamp=t)


# --- the scheme -------------------------------------------------------------------------------------


def test_the_signature_is_hmac_sha256_of_timestamp_delivery_event_and_body() -> None:
    headers = _signed()
    expected = hmac.new(SECRET, b"1700000000.0b6c1d9e-5f0a-4c3b-9d2e-7a8b9c0d1e2f.decided." + BODY, hashlib.sha256)
    assert headers == {
        "X-Gatehouse-Delivery": "0b6c1d9e-5f0a-4c3b-9d2e-7a8b9c0d1e2f",
        "X-Gatehouse-Event": "decided",
        "X-Gatehouse-Signature": f"t=1700000000,v1={expected.hexdigest()}",
    }
    assert signing.verify(SECRET, headers, BODY, now=T) == signing.Verified(headers["X-Gatehouse-Delivery"], "decided", T)
    with pytest.raises(ValueError, match="letters, digits"):
        signing.sign(SECRET, BODY, delivery="a.b", event="decided", timestamp=T)


@pytest.mark.parametrize("accepts", [_package, _documented], ids=["signing.verify", "docs snippet"])
def test_a_replay_outside_the_window_is_refused(accepts: Verifier) -> None:
    headers = _signed()
    assert accepts(SECRET, headers, BODY, T)
    assert accepts(SECRET, headers, BODY, T + 300) and accepts(SECRET, headers, BODY, T - 300)  # clocks drift
    assert not accepts(SECRET, headers, BODY, T + 301)  # captured and sent again later
    assert not accepts(SECRET, headers, BODY, T - 301)  # dated ahead


@pytest.mark.parametrize("accepts", [_package, _documented], ids=["signing.verify", "docs snippet"])
def test_a_changed_body_event_delivery_or_timestamp_is_refused(accepts: Verifier) -> None:
    headers = _signed()
    signature = headers["X-Gatehouse-Signature"]
    assert not accepts(SECRET, headers, BODY.replace(b"decided", b"approved"), T)
    assert not accepts(SECRET, headers | {"X-Gatehouse-Event": "requested"}, BODY, T)
    assert not accepts(SECRET, headers | {"X-Gatehouse-Delivery": "another-delivery"}, BODY, T)
    assert not accepts(SECRET, headers | {"X-Gatehouse-Signature": signature.replace("t=1700000000", "t=1700000100")},
                       BODY, T + 100)
    assert not accepts(b"another-secret", headers, BODY, T)
    # The boundary cannot move: the same signed bytes split at another '.' (one in the body) are refused.
    body = b'{"path":"a.txt"}'
    genuine = signing.sign(SECRET, body, delivery="d1", event="decided", timestamp=T)
    assert accepts(SECRET, genuine, body, T)
    assert not accepts(SECRET, genuine | {"X-Gatehouse-Event": 'decided.{"path":"a'}, b'txt"}', T)


@pytest.mark.parametrize("accepts", [_package, _documented], ids=["signing.verify", "docs snippet"])
def test_a_missing_or_malformed_header_is_refused(accepts: Verifier) -> None:
    headers = _signed()
    digest = headers["X-Gatehouse-Signature"].partition("v1=")[2]
    old_style = "sha256=" + hmac.new(SECRET, BODY, hashlib.sha256).hexdigest()  # the body-only scheme of before
    for signature in ("", old_style, f"v1={digest}", f"t={T}", f"t=,v1={digest}", f"t=x{T},v1={digest}",
                      f"t={T},v1=é{digest[1:]}", f"t={T},v0={digest}"):
        assert not accepts(SECRET, headers | {"X-Gatehouse-Signature": signature}, BODY, T), signature
    for name in ("X-Gatehouse-Signature", "X-Gatehouse-Delivery", "X-Gatehouse-Event"):
        assert not accepts(SECRET, {k: v for k, v in headers.items() if k != name}, BODY, T), name
    # Names are case-insensitive; during a secret rotation one of several v1 is enough.
    assert accepts(SECRET, {k.lower(): v for k, v in headers.items()}, BODY, T)
    rotated = headers | {"X-Gatehouse-Signature": f"t={T},v1={'0' * 64},v1={digest}"}
    assert accepts(SECRET, rotated, BODY, T)


def test_verify_says_why() -> None:
    headers = _signed()
    for changed, now, why in [({}, T + 301, "outside ±300s"), ({"X-Gatehouse-Event": "requested"}, T, "mismatch"),
                              ({"X-Gatehouse-Signature": "sha256=ab"}, T, "malformed"),
                              ({"X-Gatehouse-Delivery": "a.b"}, T, "Delivery or")]:
        with pytest.raises(signing.SignatureError, match=re.escape(why)):
            signing.verify(SECRET, headers | changed, BODY, now=now)
    with pytest.raises(signing.SignatureError, match="no X-Gatehouse-Signature"):
        signing.verify(SECRET, {}, BODY, now=T)


def test_signing_public_surface() -> None:
    assert signing.__all__ == [
        "DELIVERY_HEADER", "EVENT_HEADER", "SIGNATURE_HEADER", "TOLERANCE", "SignatureError", "Verified", "sign",
        "signature", "signed_content", "verify",
    ]


# --- URLs: named by scheme and host only ----------------------------------------------------------------


def test_webhook_urls_are_named_by_scheme_and_host_only() -> None:
    assert webhook_name("https://hooks.slack.com/services/T0/B0/XyZsecret") == "https://hooks.slack.com/…"
    assert webhook_name("https://user:pa55@example.com:8443/hook?token=abc") == "https://example.com:8443/…"
    assert webhook_name("http://[::1]:8080") == "http://[::1]:8080/"
    assert webhook_name("http://127.0.0.1:9/#frag") == "http://127.0.0.1:9/…"
    for bad in ("hooks.slack.com/services/T0/B0/XyZsecret", "ftp://example.com/x", "http://example.com:port/x"):
        assert webhook_name(bad) == "<not an http(s) URL>"
        with pytest.raises(ValueError, match="webhook 2 must be an http") as refused:
            load_rest_settings(webhooks=["http://ok.example/", bad], env={})
        assert "XyZsecret" not in str(refused.value) and "example.com" not in str(refused.value)


# --- delivery to a real receiver ------------------------------------------------------------------------


def _record(rid: str = "apr-1") -> ApprovalRecord:
    return ApprovalRecord(
        id=rid, task_id="t1", context_id="c1", confirmation_id=f"conf-{rid}", call_id=f"call-{rid}", tool="delete_file",
        server="files", args={"path": "a.txt"}, args_hash="h", hint="gated", created_at=1_000.0,
        expires_at=1_900.0, position=0,
    )


async def _deliver(tmp_path: Path, urls: tuple[str, ...], results: Mapping[str, float]) -> Metrics:
    """Start the webhooks, send one request to each URL, wait until the counters read ``results``, stop."""
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'hooks.db'}")  # a pending record: nothing to look up
    metrics = Metrics("a")
    settings = RestSettings(webhooks=urls, webhook_secret=SECRET, webhook_attempts=3, webhook_backoff=0.01)
    hooks = Webhooks(db, "files-agent", settings, metrics, clock=itertools.count(T, 100).__next__)
    hooks.start()

    def count(result: str) -> float:
        return metrics.registry.get_sample_value("gatehouse_webhook_deliveries_total", {"result": result}) or 0

    try:
        hooks.on_approval_event(ApprovalEvent("requested", (_record(),)))
        deadline = time.monotonic() + 30
        while any(count(r) < n for r, n in results.items()) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    finally:
        await hooks.stop()
        await db.dispose()
    assert {r: count(r) for r in ("ok", "refused", "dead_letter", "error")} == {"ok": 0, "refused": 0, "dead_letter": 0,
                                                                              "error": 0} | dict(results)
    return metrics


async def test_a_failing_receiver_is_retried_with_fresh_signatures_then_dead_lettered(tmp_path: Path) -> None:
    with webhook_receiver() as receiver:
        receiver.status.update({"/fail": 500, "/nope": 400})
        urls = (f"{receiver.url}/ok", f"{receiver.url}/fail", f"{receiver.url}/nope", f"http://127.0.0.1:{free_port()}/")
        await _deliver(tmp_path, urls, {"ok": 1, "refused": 1, "dead_letter": 2})
    (ok,) = receiver.at("/ok")
    assert _verified_at_its_time(ok).event == "requested"
    attempts = receiver.at("/fail")
    assert len(attempts) == 3 and len({a.headers["x-gatehouse-delivery"] for a in attempts}) == 1  # one delivery
    stamps = [_verified_at_its_time(a).timestamp for a in attempts]
    assert stamps == sorted(set(stamps))  # each attempt signed anew
    assert len(receiver.at("/nope")) == 1  # a 4xx is not retried


def _verified_at_its_time(delivery: Delivery) -> signing.Verified:
    stamp = int(delivery.headers["x-gatehouse-signature"].split(",")[0].removeprefix("t="))
    return signing.verify(SECRET, delivery.headers, delivery.body, now=stamp)


async def test_logs_name_a_webhook_by_scheme_and_host_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # httpx's own "HTTP Request: POST <url>" lines included
    secret_path = "/services/T0/B0/XyZsecret?token=qwerty"
    with webhook_receiver() as receiver:
        receiver.status.update({secret_path: 500, "/refuse/XyZsecret": 403, "/ok/XyZsecret": 200})
        host = receiver.url.replace("127.0.0.1", "hook:hunter2@127.0.0.1")  # credentials in the URL, too
        urls = (f"{host}{secret_path}", f"{receiver.url}/refuse/XyZsecret", f"{receiver.url}/ok/XyZsecret",
                f"http://127.0.0.1:{free_port()}/down/XyZsecret")
        await _deliver(tmp_path, urls, {"ok": 1, "refused": 1, "dead_letter": 2})
    assert len(receiver.at(secret_path)) == 3
    lines = [record.getMessage() for record in caplog.records]
    assert any(line.startswith("HTTP Request: POST ") for line in lines)  # httpx did log, and was filtered
    assert any(f"webhook 1 {receiver.url}/…: the requested delivery for apr-1" in line and "dead-lettered" in line
               for line in lines), lines
    assert any("webhook 2" in line and "refused: HTTP 403" in line for line in lines), lines
    leaks = [line for line in [*lines, caplog.text] if re.search("XyZsecret|qwerty|hunter2|services", line)]
    assert not leaks
