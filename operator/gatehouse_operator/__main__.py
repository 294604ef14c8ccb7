"""``gatehouse-operator`` / ``python -m gatehouse_operator``: ``kopf run -m gatehouse_operator`` plus any flags.

Without flags it watches all namespaces: ``gatehouse-operator --namespace team-a`` narrows it,
``gatehouse-operator --liveness=http://0.0.0.0:8080/healthz`` adds kopf's health endpoint.
``--trust-kubectl-without-admission-policy`` is the operator's own flag (the environment variable
``GATEHOUSE_TRUST_KUBECTL_WITHOUT_ADMISSION_POLICY=true``, which ``kopf run`` itself reads through the settings).
"""

from __future__ import annotations

import os
import sys

from kopf import cli

from gatehouse_operator.settings import TRUST_KUBECTL_ENV

TRUST_KUBECTL_FLAG = "--trust-kubectl-without-admission-policy"


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if TRUST_KUBECTL_FLAG in args:
        args = [a for a in args if a != TRUST_KUBECTL_FLAG]
        os.environ[TRUST_KUBECTL_ENV] = "true"
    if not any(a.startswith(("--namespace", "-n", "--all-namespaces", "-A")) for a in args):
        args.append("--all-namespaces")
    cli.main(args=["run", "-m", "gatehouse_operator", *args], prog_name="gatehouse-operator")


if __name__ == "__main__":
    main()
