"""``python -m tests.support.cluster build|up|down``: what ``make cluster-bin``, ``cluster-up`` and ``cluster-down`` run.

``up`` starts the cluster named ``default`` under ``.gatehouse/clusters/`` (stopping an earlier one first) and
leaves it running; ``down`` stops it and removes its files.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from tests.support.cluster import binaries, launcher

NAME = "default"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.cluster")
    parser.add_argument("command", choices=["build", "up", "down"])
    parser.add_argument("--name", default=NAME, help="which cluster under .gatehouse/clusters/ (default: %(default)s)")
    parser.add_argument("--owner-pid", type=int, help="up: the cluster is a leftover once this process is gone")
    args = parser.parse_args(argv)
    if args.command == "down":
        launcher.stop(launcher.CLUSTERS / args.name)
        print(f"stopped and removed {launcher.CLUSTERS / args.name}")
        return 0
    try:
        built = binaries.build()
    except binaries.ClusterUnavailable as exc:
        print(f"NOTE: no real control plane here: {exc}", file=sys.stderr)
        # Without Go a laptop skips the real-cluster tests (they say why); CI must not.
        return 1 if os.environ.get("CI") or args.command == "up" else 0
    if args.command == "build":
        print(f"control plane {binaries.KUBERNETES_VERSION}: {built.bin}")
        return 0
    started = time.monotonic()
    cluster = launcher.start(owned=False, name=args.name, owner_pid=args.owner_pid)
    kubectl, helm = cluster.kubectl_path, cluster.helm_path
    print(f"""control plane {binaries.KUBERNETES_VERSION} up in {time.monotonic() - started:.1f} s at {cluster.server}
  export KUBECONFIG={cluster.kubeconfig()}
  alias kubectl={kubectl} helm={helm}   # kubectl 1.36 and helm 4 (in the version skew policy)
  users: {cluster.kubeconfig('alice')} (alice, group sre), {cluster.kubeconfig('bob')} (bob)
  logs and audit log: {cluster.layout.root / 'logs'}
  stop: make cluster-down""" + ("" if args.name == NAME else f" (python -m tests.support.cluster down --name {args.name})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
