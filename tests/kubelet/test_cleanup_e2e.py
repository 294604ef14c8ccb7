"""Nothing outlives a session: a normal stop removes the network and processes; a killed session's leftovers are
removed by the next one (tests/support/kubelet/network.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.kubelet.cluster import SLEEPER, Cluster
from tests.support.kube_server import serve
from tests.support.kubelet import require, run_kubelet
from tests.support.kubelet.network import STATE_DIR, reap_stale

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SESSION = """
import sys, time
from pathlib import Path
from tests.kubelet.cluster import Cluster, SLEEPER
from tests.support.kube_server import serve
from tests.support.kubelet import run_kubelet
with serve() as api, run_kubelet(api, Path(sys.argv[1])) as kubelet:
    Cluster(api).create(SLEEPER)
    kubelet.wait_ready("sleeper")
    print(kubelet.network.tag, *kubelet.processes, flush=True)
    time.sleep(3600)
"""


def _leftovers(tag: str) -> list[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    found = [n for n in names if n.startswith(f"gk{tag}-")]
    found += [w.strip().split("@")[0] for w in links.split(":")[1::2] if w.strip().startswith(f"gk{tag}")]
    return found + ([str(STATE_DIR / f"{tag}.json")] if (STATE_DIR / f"{tag}.json").exists() else [])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_normal_stop_leaves_nothing_behind(tmp_path: Path) -> None:
    require()
    with serve() as api, run_kubelet(api, tmp_path) as kubelet:
        Cluster(api).create(SLEEPER)
        kubelet.wait_ready("sleeper")
        tag, pids = kubelet.network.tag, set(kubelet.processes)
        assert _leftovers(tag) and pids
    assert _leftovers(tag) == [] and not any(_alive(p) for p in pids)


def test_the_next_session_removes_what_a_killed_one_left(tmp_path: Path) -> None:
    require()
    session = subprocess.Popen([sys.executable, "-c", SESSION, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert session.stdout is not None
        tag, *pids = session.stdout.readline().split()
        session.kill()  # SIGKILL: no atexit, no finally
        session.wait(10)
    finally:
        if session.poll() is None:
            session.kill()
    assert _leftovers(tag) and all(_alive(int(p)) for p in pids)  # the pod outlived its kubelet, as it would

    assert tag in reap_stale()  # what Network.setup() runs first
    deadline = time.monotonic() + 10
    while any(_alive(int(p)) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _leftovers(tag) == [] and not any(_alive(int(p)) for p in pids)
