"""A state written by the release before sign-outs were stored (tests/testdata/state-v4-inbox, see its README): alice
signed in to the inbox there. This runtime creates the table of signed-out sessions on opening it; her cookie from that
release still opens the inbox (the session key is the one in the database), and once she signs out it stays refused,
restart or not.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from agent_runtime.approvals.schema import SCHEMA_VERSION
from tests.infra.test_state_upgrade import query, upgraded_runtime

pytestmark = pytest.mark.e2e

STATE_V4_INBOX = Path(__file__).parents[1] / "testdata" / "state-v4-inbox" / "gatehouse.db"
COOKIE = (  # alice's, issued by that release (see the README)
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJhdWQiOiJnYXRlaG91c2UtdWkiLCJzdWIiOiJhbGljZSIsImdycCI6WyJzcmUiXSwidmlhI"
    "joidG9rZW4iLCJzZWVuIjoiYWxpY2UiLCJjc3JmIjoiTjFFV3VwZ3gteUdGZDRWem1OVUZodE8wU1cycU5rT2YiLCJpYXQiOjE3OTU3NDQyNTU"
    "sImV4cCI6MjExMTEwNDI1NSwianRpIjoiam9Xd3hsSDJqbTBzMEpjNyJ9.kDO95O1fuyabNZ5Aux8oVW5mdxHi2CHPXc4IVTMPtfU"
)
JTI = "joWwxlH2jm0s0Jc7"


def tables(db: Path) -> set[str]:
    return {name for (name,) in query(db, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_the_fixture_has_a_session_key_and_no_table_of_signed_out_sessions() -> None:
    assert query(STATE_V4_INBOX, "SELECT component, version FROM gatehouse_schema") == [("runtime", 4)]
    assert "gatehouse_ui_session_keys" in tables(STATE_V4_INBOX)
    assert "gatehouse_ui_revoked_sessions" not in tables(STATE_V4_INBOX)
    assert query(STATE_V4_INBOX, "SELECT name FROM gatehouse_ui_session_keys") == [("session",)]


def test_an_old_releases_session_still_opens_the_inbox_and_its_sign_out_survives_a_restart(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("alice:groups=sre:tok-alice\n")
    serve = ["--api-token-file", str(tmp_path / "tokens")]
    with upgraded_runtime(tmp_path, serve, state=STATE_V4_INBOX, path="unused.txt") as (proc, _, db):
        assert query(db, "SELECT component, version FROM gatehouse_schema") == [("runtime", SCHEMA_VERSION)]
        assert query(db, "SELECT count(*) FROM gatehouse_ui_revoked_sessions") == [(0,)]
        browser = httpx.Client(base_url=proc.url, cookies={"gatehouse_session": COOKIE}, timeout=30)
        page = browser.get("/ui/")
        assert page.status_code == 200 and 'data-testid="viewer">alice<' in page.text, page.text[:300]
        csrf = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
        assert csrf is not None
        out = browser.post("/ui/logout", headers={"X-CSRF-Token": csrf.group(1)}, follow_redirects=False)
        assert out.status_code == 303 and out.headers["location"] == "/ui/login"
        assert query(db, "SELECT jti FROM gatehouse_ui_revoked_sessions") == [(JTI,)]
        kept = httpx.Client(base_url=proc.url, cookies={"gatehouse_session": COOKIE}, timeout=30)  # a copy of the cookie

        def refused() -> None:
            again = kept.get("/ui/", follow_redirects=False)
            assert (again.status_code, again.headers.get("location")) == (303, "/ui/login?next=/ui/")
            assert kept.get("/ui/events").status_code == 401

        refused()
        proc.stop()
        proc.start()
        refused()
