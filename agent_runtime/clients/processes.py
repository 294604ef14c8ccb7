"""Stopping a child process: SIGTERM, a grace period, then SIGKILL (the demo, the bench and the tests share it)."""

from __future__ import annotations

import subprocess


def stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Ask ``proc`` to exit; kill it if it has not after ``grace`` seconds. A process already gone is left alone."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


__all__ = ["stop"]
