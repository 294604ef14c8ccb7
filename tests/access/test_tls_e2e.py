"""``--tls-cert/--tls-key``: the runtime serves HTTPS itself (TLS is otherwise the cluster's concern), its card
announces an https URL, and a bad pair is a one-line error before anything starts."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support.runtime import RUNTIME_CMD, Rpc, RuntimeProcess, demo_tools, state, write_manifests
from tests.support.tls import self_signed

pytestmark = pytest.mark.e2e


def test_the_runtime_serves_https_with_its_own_certificate(tmp_path: Path) -> None:
    cert, key = self_signed()
    (tmp_path / "tls.crt").write_text(cert)
    (tmp_path / "tls.key").write_text(key)
    (tmp_path / "tokens").write_text("alice:tok-alice\n")
    trust = ssl.create_default_context(cadata=cert)
    with demo_tools(tmp_path / "tools") as tools:
        files = write_manifests(tmp_path / "manifests", tools.url)
        proc = RuntimeProcess(files, tmp_path / "state", tmp_path / "runtime.log", verify=trust, serve_args=[
            "--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key"),
            "--api-token-file", str(tmp_path / "tokens")])
        proc.start()
        try:
            card = httpx.get(f"{proc.url}/.well-known/agent-card.json", verify=trust).json()
            assert card["supportedInterfaces"][0]["url"].startswith(f"https://127.0.0.1:{proc.port}"), card
            assert state(Rpc(proc.url, "tok-alice", verify=trust).send("list /")["task"]) == "TASK_STATE_COMPLETED"
            with pytest.raises(httpx.ConnectError):  # a client that does not trust the certificate stops there
                httpx.get(f"{proc.url}/readyz")
            with pytest.raises(httpx.HTTPError):  # and plain HTTP gets no answer
                httpx.get(f"http://127.0.0.1:{proc.port}/readyz", timeout=5)
        finally:
            proc.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tls-cert", "{d}/tls.crt"], "--tls-cert and --tls-key go together"),
        (["--tls-cert", "{d}/missing.crt", "--tls-key", "{d}/tls.key"], "--tls-cert {d}/missing.crt: no such file"),
        (["--tls-cert", "{d}/tls.key", "--tls-key", "{d}/tls.crt"], "not a usable certificate and key"),
    ],
)
def test_a_bad_certificate_pair_is_a_one_line_error(tmp_path: Path, args: list[str], message: str) -> None:
    cert, key = self_signed()
    (tmp_path / "tls.crt").write_text(cert)
    (tmp_path / "tls.key").write_text(key)
    files = write_manifests(tmp_path / "manifests", "http://127.0.0.1:9/mcp")
    cmd = [*RUNTIME_CMD, "serve", *[a for f in files for a in ("-f", str(f))], *(a.format(d=tmp_path) for a in args)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done
    assert message.format(d=tmp_path) in " ".join(done.stderr.split()) and "Traceback" not in done.stderr
