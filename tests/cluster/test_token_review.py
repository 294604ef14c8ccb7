"""The runtime's TokenReview (agent_runtime/kube/token_review.py) against the real API server: a ServiceAccount
token issued by the TokenRequest API is whoever the API server says, an audience is honoured, and a token the API
server does not know is nobody."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from agent_runtime.access.methods import Identity
from agent_runtime.kube.client import KubeClient
from agent_runtime.kube.token_review import TokenReviewMethod
from tests.support.cluster import Cluster

pytestmark = pytest.mark.e2e

NS = "reviews"


def _token(kubeconfig: Path) -> str:
    config = yaml.safe_load(kubeconfig.read_text())
    return str(config["users"][0]["user"]["token"])


@pytest.fixture(scope="module")
def runtime_kubeconfig(cluster: Cluster) -> Path:
    """The runtime's own ServiceAccount, bound to system:auth-delegator (as the operator binds it)."""
    cluster.kubectl("create", "namespace", NS)
    bound = cluster.kubectl("create", "clusterrolebinding", "reviews-runtime-auth-delegator",
                            "--clusterrole=system:auth-delegator", f"--serviceaccount={NS}:runtime")
    assert bound.returncode == 0, bound.stderr
    return cluster.service_account(NS, "runtime")


@pytest.fixture
async def runtime(runtime_kubeconfig: Path) -> AsyncIterator[KubeClient]:
    """The runtime's client, as it connects with a kubeconfig (one per test: a client belongs to one event loop)."""
    kube = KubeClient.connect(runtime_kubeconfig, in_cluster=False)
    yield kube
    await kube.aclose()


async def test_a_service_account_token_is_the_account_the_api_server_names(cluster: Cluster, runtime: KubeClient) -> None:
    caller = _token(cluster.service_account(NS, "caller"))
    identity = await TokenReviewMethod(runtime).identify(caller)
    assert identity == Identity(f"system:serviceaccount:{NS}:caller", frozenset(
        {"system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"}), "kubernetes")


async def test_an_audience_is_honoured_both_ways(cluster: Cluster, runtime: KubeClient) -> None:
    for_gatehouse = _token(cluster.service_account(NS, "peer", audience="gatehouse"))
    for_the_api = _token(cluster.service_account(NS, "peer"))
    gatehouse = TokenReviewMethod(runtime, audiences=["gatehouse"])
    assert (await gatehouse.identify(for_gatehouse)) is not None
    assert await gatehouse.identify(for_the_api) is None  # an API-server token is not meant for Gatehouse
    assert await TokenReviewMethod(runtime).identify(for_gatehouse) is None  # nor the other way round


async def test_a_token_the_api_server_does_not_know_is_nobody(runtime: KubeClient) -> None:
    assert await TokenReviewMethod(runtime).identify("not-a-token") is None
