"""A local stand-in for the Slack Web API, and interaction payloads signed as Slack signs them.

:func:`serve` runs a real HTTP server on 127.0.0.1 (a thread) answering the few methods the bridge uses --
``chat.postMessage``, ``chat.update``, ``chat.postEphemeral``, ``views.open``, ``users.info``, ``auth.test`` -- as
Slack documents their answers, and records every call (:attr:`SlackStandIn.calls`). ``slack_sdk``'s ``WebClient`` is
pointed at it with ``base_url`` (``gatehouse slack --slack-api-url``). :meth:`SlackStandIn.fail_next` makes the next
calls of a method fail (HTTP 503, or Slack's ``ratelimited`` 429) to show that nothing is lost while Slack is down.

:func:`block_action` and :func:`view_submission` build the bodies Slack posts to an app's Interactivity Request URL
(``application/x-www-form-urlencoded``, one field ``payload`` holding the JSON), and :func:`signed` the headers:
``X-Slack-Request-Timestamp`` and ``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:<timestamp>:<body>">``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

__all__ = ["Call", "SlackStandIn", "block_action", "serve", "signed", "view_submission"]


@dataclass(frozen=True)
class Call:
    method: str  # chat.postMessage …
    args: dict[str, Any]
    token: str
    at: float
    answered: int  # the HTTP status it got


@dataclass
class SlackStandIn:
    url: str = ""  # the base URL to give WebClient (ends with /api/)
    channels: dict[str, str] = field(default_factory=dict)  # "#name" -> channel id
    emails: dict[str, str] = field(default_factory=dict)  # user id -> profile e-mail
    calls: list[Call] = field(default_factory=list)
    _failures: dict[str, list[int]] = field(default_factory=dict)
    _ts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, method: str, count: int, status: int = 503) -> None:
        with self._lock:
            self._failures.setdefault(method, []).extend([status] * count)

    def of(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method and c.answered == 200]

    def answer(self, method: str, args: dict[str, Any], token: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            failures = self._failures.get(method) or []
            status = failures.pop(0) if failures else 200
            self.calls.append(Call(method, args, token, time.time(), status))
            if status == 429:
                return 429, {"ok": False, "error": "ratelimited"}
            if status != 200:
                return status, {"ok": False, "error": "service_unavailable"}
            if token != "xoxb-test-token" and method != "api.test":
                return 200, {"ok": False, "error": "invalid_auth"}
            if method == "chat.postMessage":
                self._ts += 1
                channel = self.channels.get(str(args.get("channel")), str(args.get("channel")))
                return 200, {"ok": True, "channel": channel, "ts": f"1790000000.{self._ts:06d}",
                             "message": {"text": args.get("text"), "blocks": args.get("blocks")}}
            if method == "chat.update":
                return 200, {"ok": True, "channel": args.get("channel"), "ts": args.get("ts"), "text": args.get("text")}
            if method == "chat.postEphemeral":
                self._ts += 1
                return 200, {"ok": True, "message_ts": f"1790000000.{self._ts:06d}"}
            if method == "views.open":
                return 200, {"ok": True, "view": {"id": f"V{len(self.calls):08d}", **(args.get("view") or {})}}
            if method == "users.info":
                user = str(args.get("user"))
                if user not in self.emails:
                    return 200, {"ok": False, "error": "user_not_found"}
                return 200, {"ok": True, "user": {"id": user, "profile": {"email": self.emails[user]}}}
            if method == "auth.test":
                return 200, {"ok": True, "user_id": "UBRIDGE", "team_id": "T0TEST"}
            return 200, {"ok": False, "error": "unknown_method"}


def _handler(standin: SlackStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def _serve(self) -> None:
            url = urlparse(self.path)
            method = url.path.rsplit("/", 1)[-1]
            args: dict[str, Any] = {k: v[0] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if raw:
                if (self.headers.get("Content-Type") or "").startswith("application/json"):
                    args.update(json.loads(raw))
                else:
                    args.update({k: v[0] for k, v in parse_qs(raw.decode()).items()})
            for key in ("blocks", "view"):  # form-encoded calls carry them as JSON text
                if isinstance(args.get(key), str):
                    args[key] = json.loads(args[key])
            token = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip() or str(args.pop("token", ""))
            status, body = standin.answer(method, args, token)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("Retry-After", "1")
            self.end_headers()
            self.wfile.write(data)

        do_POST = _serve
        do_GET = _serve

    return Handler


@contextlib.contextmanager
def serve(**kwargs: Any) -> Iterator[SlackStandIn]:
    standin = SlackStandIn(**kwargs)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(standin))
    standin.url = f"http://127.0.0.1:{server.server_address[1]}/api/"
    thread = threading.Thread(target=server.serve_forever, name="slack-standin", daemon=True)
    thread.start()
    try:
        yield standin
    finally:
        server.shutdown()
        server.server_close()


def signed(body: str, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """The headers Slack sends with ``body``: its timestamp and the v0 signature over both with the signing secret."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}",
            "Content-Type": "application/x-www-form-urlencoded"}


def _form(payload: dict[str, Any]) -> str:
    return urlencode({"payload": json.dumps(payload)})


def block_action(user: str, channel: str, ts: str, action_id: str, value: str, trigger_id: str = "") -> str:
    """A ``block_actions`` payload: ``user`` clicked the button ``action_id`` (its ``value``) on message ``ts``."""
    return _form({
        "type": "block_actions", "team": {"id": "T0TEST", "domain": "test"},
        "user": {"id": user, "username": user.lower(), "team_id": "T0TEST"},
        "api_app_id": "A0GATEHOUSE", "token": "legacy-verification-token-unused",
        "container": {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": False},
        "trigger_id": trigger_id or f"trigger-{user}-{time.time_ns()}",
        "channel": {"id": channel, "name": "ops-approvals"},
        "message": {"type": "message", "ts": ts, "text": "…"},
        "response_url": "https://hooks.slack.invalid/actions/T0TEST/1/x",
        "actions": [{"type": "button", "action_id": action_id, "block_id": "decide", "value": value,
                     "text": {"type": "plain_text", "text": action_id}, "action_ts": f"{time.time():.6f}"}],
    })


def view_submission(user: str, callback_id: str, private_metadata: str, values: dict[str, Any]) -> str:
    """A ``view_submission`` payload: ``user`` submitted the modal ``callback_id`` with ``values`` (its state)."""
    return _form({
        "type": "view_submission", "team": {"id": "T0TEST", "domain": "test"},
        "user": {"id": user, "username": user.lower(), "team_id": "T0TEST"},
        "api_app_id": "A0GATEHOUSE", "trigger_id": f"trigger-{time.time_ns()}",
        "view": {"id": "V0DIALOG", "type": "modal", "callback_id": callback_id, "private_metadata": private_metadata,
                 "state": {"values": values}},
    })
