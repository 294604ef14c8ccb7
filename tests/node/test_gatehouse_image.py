"""The project's own image, built from its Dockerfile by buildah on a debootstrap Debian base, run by the real
kubelet as the chart runs it: uid 10001, read-only root, no capabilities, seccomp RuntimeDefault."""

from __future__ import annotations

import pytest

from tests.node.test_pod_security_enforced import _ensure_namespace, _pod, run_to_completion
from tests.support.cluster import realnode

pytestmark = pytest.mark.e2e_node

PROBE = """
id
gatehouse-runtime --help >/dev/null && echo RUNTIME=ok
kopf --version
python3 -c 'import gatehouse_operator, agent_runtime; print("IMPORTS=ok")'
touch /opt/gatehouse/owned 2>/dev/null && echo VENV=writable || echo VENV=read-only
test -e /src && echo SRC=present || echo SRC=absent
"""


def test_the_project_image_runs_restricted(node: realnode.RealNode) -> None:
    if node.runtime != "runc":
        pytest.skip("the image under runc (crun: see test_crun_refuses_this_machines_cgroups)")
    archive, times = realnode.gatehouse_image()
    size = archive.stat().st_size / 2**20
    loaded = node.load(archive)
    print(f"\nimage {archive.name}: {size:.0f} MiB archive, build {times or 'cached'}, import {loaded:.1f} s")
    _ensure_namespace(node.cluster)
    pod = _pod("gatehouse-image", node.name, PROBE)
    container = pod["spec"]["containers"][0]
    container["image"] = realnode.GATEHOUSE_IMAGE
    phase, logs, elapsed = run_to_completion(node.cluster, pod, timeout=180)
    print(f"created to {phase} in {elapsed:.1f} s\n{logs}")
    assert phase == "Succeeded", logs
    assert logs.startswith("uid=10001"), logs
    for expected in ("RUNTIME=ok", "IMPORTS=ok", "VENV=read-only", "SRC=absent"):
        assert expected in logs.splitlines(), logs
