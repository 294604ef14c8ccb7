"""``gatehouse-operator`` / ``python -m gatehouse_operator``: ``kopf run -m gatehouse_operator`` plus any flags.

Without flags it watches all namespaces: ``gatehouse-operator --namespace team-a`` narrows it,
``gatehouse-operator --liveness=http://0.0.0.0:8080/healthz`` adds kopf's health endpoint.
"""

from __future__ import annotations

import sys

from kopf import cli


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a.startswith(("--namespace", "-n", "--all-namespaces", "-A")) for a in args):
        args.append("--all-namespaces")
    cli.main(args=["run", "-m", "gatehouse_operator", *args], prog_name="gatehouse-operator")


if __name__ == "__main__":
    main()
