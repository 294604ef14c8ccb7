"""``gatehouse-operator`` / ``python -m gatehouse_operator``: ``kopf run -m gatehouse_operator`` plus any flags.

Without flags it watches all namespaces: ``gatehouse-operator --namespace team-a`` narrows it,
``gatehouse-operator --liveness=http://0.0.0.0:8080/healthz`` adds kopf's health endpoint (on the leader only: the
operator's own ``/healthz`` and ``/metrics``, served by every replica, come with ``GATEHOUSE_OPERATOR_LISTEN``).
``--trust-kubectl-without-admission-policy`` is the operator's own flag (the environment variable
``GATEHOUSE_TRUST_KUBECTL_WITHOUT_ADMISSION_POLICY=true``, which ``kopf run`` itself reads through the settings);
so is ``--secret-check-interval 30s`` (``GATEHOUSE_SECRET_CHECK_INTERVAL``: how often the referenced Secrets are
read again).
"""

from __future__ import annotations

import os
import sys

from kopf import cli

from agent_runtime.contract.durations import parse_duration
from gatehouse_operator.settings import SECRET_CHECK_ENV, TRUST_KUBECTL_ENV

TRUST_KUBECTL_FLAG = "--trust-kubectl-without-admission-policy"
SECRET_CHECK_FLAG = "--secret-check-interval"


def _take_secret_check(args: list[str]) -> list[str]:
    """Remove ``--secret-check-interval VALUE`` (or ``=VALUE``) from ``args`` into the environment."""
    rest: list[str] = []
    items = iter(args)
    for arg in items:
        if arg == SECRET_CHECK_FLAG or arg.startswith(f"{SECRET_CHECK_FLAG}="):
            value = arg.partition("=")[2] if "=" in arg else next(items, "")
            try:
                parse_duration(value)
            except ValueError as exc:
                raise SystemExit(f"gatehouse-operator: {SECRET_CHECK_FLAG}: {exc}") from None
            os.environ[SECRET_CHECK_ENV] = value
        else:
            rest.append(arg)
    return rest


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if TRUST_KUBECTL_FLAG in args:
        args = [a for a in args if a != TRUST_KUBECTL_FLAG]
        os.environ[TRUST_KUBECTL_ENV] = "true"
    args = _take_secret_check(args)
    if not any(a.startswith(("--namespace", "-n", "--all-namespaces", "-A")) for a in args):
        args.append("--all-namespaces")
    cli.main(args=["run", "-m", "gatehouse_operator", *args], prog_name="gatehouse-operator")


if __name__ == "__main__":
    main()
