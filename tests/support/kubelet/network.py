"""The pods' network: one Linux bridge per test session, one network namespace (and address) per pod.

::

    root namespace (the test process, the emulated API)          pod namespaces
    ───────────────────────────────────────────────────          ──────────────────────────────────
    bridge gk<tag>br  10.213.N.1/24  ◄── veth gk<tag>v<i> ──►    eth0 10.213.N.i/24, lo 127.0.0.1
      ├─ the API's TLS listener 10.213.N.1:443                    default route via 10.213.N.1
      └─ the test reaches every pod address directly             (pod ↔ pod over the bridge)

``<tag>`` (5 hex digits) is new per session, so parallel or half-cleaned runs never share a name; the /24 is the first
one of 10.213.0.0/16 no interface on the machine uses, picked under a lock file. A state file
(``/run/gatehouse-kubelet/<tag>.json``, with the owner's pid) lets the next session remove everything a killed session
left behind (its namespaces' processes, namespaces and links). No forwarding or NAT: pods reach the subnet only.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import secrets
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["STATE_DIR", "Network", "Sandbox", "reap_stale"]

STATE_DIR = Path("/run/gatehouse-kubelet")
SUPERNET = ipaddress.IPv4Network("10.213.0.0/16")


def _ip(*args: str, netns: str | None = None, check: bool = True, stdin: str | None = None) -> str:
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()} {stdin or ''}")
    return done.stdout


@dataclass(frozen=True)
class Sandbox:
    """One pod's network: its namespace (``/run/netns/<netns>``), address and the host end of its veth."""

    netns: str
    ip: str
    host_veth: str

    @property
    def path(self) -> str:
        return f"/run/netns/{self.netns}"


def _used_networks() -> set[ipaddress.IPv4Network]:
    used = set()
    for line in _ip("-4", "-o", "addr", "show").splitlines():
        for word in line.split():
            if "/" in word and word[0].isdigit():
                with contextlib.suppress(ValueError):
                    used.add(ipaddress.ip_interface(word).network)
    for line in _ip("-4", "route", "show", "table", "all").splitlines():
        with contextlib.suppress(ValueError):
            used.add(ipaddress.ip_network(line.split()[0]))
    return {n for n in used if isinstance(n, ipaddress.IPv4Network)}


def _remove_session(tag: str) -> None:
    """Kill the processes in a session's namespaces, delete the namespaces and links (best effort)."""
    prefix = f"gk{tag}"
    for line in _ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(f"{prefix}-"):
            for pid in _ip("netns", "pids", name, check=False).split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            _ip("netns", "del", name, check=False)
    for line in _ip("-o", "link", "show", check=False).splitlines():
        parts = line.split(":")
        if len(parts) > 1 and parts[1].strip().split("@")[0].startswith(prefix):
            _ip("link", "del", parts[1].strip().split("@")[0], check=False)


def reap_stale(state_dir: Path = STATE_DIR) -> list[str]:
    """Remove what sessions whose process is gone left behind; returns their tags."""
    reaped = []
    for state in state_dir.glob("*.json") if state_dir.is_dir() else []:
        try:
            owner = json.loads(state.read_text())
            os.kill(int(owner["pid"]), 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except (ValueError, KeyError, OSError):
            pass
        _remove_session(state.stem)
        state.unlink(missing_ok=True)
        reaped.append(state.stem)
    return reaped


class Network:
    """The session's bridge and the pods' sandboxes; :meth:`setup` first, :meth:`teardown` last (idempotent)."""

    def __init__(self, state_dir: Path = STATE_DIR) -> None:
        self.state_dir = state_dir
        self.tag = secrets.token_hex(3)[:5]
        self.bridge = f"gk{self.tag}br"
        self.subnet: ipaddress.IPv4Network | None = None
        self._next = 2
        self._serial = 0
        self._in_use: set[str] = set()
        self.sandboxes: dict[str, Sandbox] = {}

    @property
    def gateway(self) -> str:
        """The bridge's address: the test host as pods see it (the API listens here)."""
        assert self.subnet is not None, "setup() first"
        return str(self.subnet.network_address + 1)

    def setup(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        reap_stale(self.state_dir)
        with (self.state_dir / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = _used_networks()
            free = [n for n in SUPERNET.subnets(new_prefix=24) if not any(n.overlaps(u) for u in used)]
            if not free:
                raise RuntimeError(f"no free /24 left in {SUPERNET}")
            subnet = self.subnet = free[int(self.tag, 16) % min(len(free), 64)]
            (self.state_dir / f"{self.tag}.json").write_text(json.dumps({"pid": os.getpid(), "subnet": str(self.subnet)}))
            try:
                _ip("link", "add", self.bridge, "type", "bridge")
                _ip("addr", "add", f"{self.gateway}/{subnet.prefixlen}", "dev", self.bridge)
                _ip("link", "set", self.bridge, "up")
            except BaseException:
                self.teardown()
                raise

    def _address(self) -> str:
        assert self.subnet is not None
        size = self.subnet.num_addresses - 2
        for _ in range(size):
            index, self._next = self._next, (self._next - 1) % (size - 1) + 2  # 2..size, round robin
            ip = str(self.subnet.network_address + index)
            if ip not in self._in_use:
                self._in_use.add(ip)
                return ip
        raise RuntimeError(f"no free address left in {self.subnet}")

    def add_pod(self) -> Sandbox:
        """A new namespace with ``eth0`` on the bridge and ``lo`` up (blocking: a few ``ip`` calls)."""
        assert self.subnet is not None
        self._serial += 1
        box = Sandbox(f"gk{self.tag}-{self._serial}", self._address(), f"gk{self.tag}v{self._serial}")
        peer = f"gk{self.tag}p{self._serial}"
        self.sandboxes[box.netns] = box
        try:
            _ip("netns", "add", box.netns)
            _ip("-batch", "-", stdin="\n".join([
                f"link add {box.host_veth} type veth peer name {peer}",
                f"link set {peer} netns {box.netns}",
                f"link set {box.host_veth} master {self.bridge} up",
            ]) + "\n")
            _ip("-batch", "-", netns=box.netns, stdin="\n".join([
                f"link set {peer} name eth0",
                f"addr add {box.ip}/{self.subnet.prefixlen} dev eth0",
                "link set eth0 up",
                "link set lo up",
                f"route add default via {self.gateway}",
            ]) + "\n")
        except BaseException:
            self.remove_pod(box)
            raise
        return box

    def remove_pod(self, box: Sandbox) -> None:
        """Kill anything left in the namespace, then delete it and the veth (best effort, idempotent)."""
        for pid in _ip("netns", "pids", box.netns, check=False).split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        _ip("netns", "del", box.netns, check=False)
        _ip("link", "del", box.host_veth, check=False)
        self._in_use.discard(box.ip)
        self.sandboxes.pop(box.netns, None)

    def teardown(self) -> None:
        for box in list(self.sandboxes.values()):
            self.remove_pod(box)
        _remove_session(self.tag)
        (self.state_dir / f"{self.tag}.json").unlink(missing_ok=True)
