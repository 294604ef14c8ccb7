"""A kubelet stand-in for end-to-end tests: the Deployments of the emulated API, run as local processes.

For each Deployment in the emulated API (:mod:`tests.support.kube_emulator`) it runs the pod template's containers
as the spec says -- same command, args, ports and paths, nothing rewritten -- each pod in its own network namespace
(its own address on a bridge, so two pods both listen on 8080) and each container in its own mount namespace
(Secret, ConfigMap, projected and downwardAPI volumes as files, ``emptyDir`` fresh per pod, one directory per
PersistentVolumeClaim that outlives pods, the ServiceAccount's token, ``ca.crt`` and ``namespace`` at
``/var/run/secrets/kubernetes.io/serviceaccount``, an ``/etc/hosts`` resolving ``<service>.<namespace>.svc.cluster.local``
to the Service's ready pods) with ``KUBERNETES_SERVICE_HOST``/``PORT`` pointing at the emulated API over TLS: so the
unmodified in-cluster configuration is what runs. It reports readiness from the probes, rolls pods on a template
change as the strategy says, writes Pod objects and the Deployment's status.

The one translation is image → executables (:mod:`~tests.support.kubelet.images`: the image's configuration from
the Dockerfile, its executables from the venv). docs/testing-pods.md lists every mapping and what is not exercised.

Modules, one concept each::

    fixture     run_kubelet(), the `kubelet` fixture, skip (or fail under CI) when the machine cannot
    node        the Node: loop thread, informers, reconcile, the test-facing methods
    controller  Deployment rollouts (plan) and .status, pure
    pods        one pod: prepare, containers as processes, probes, restarts, stop
    podobject   the Pod object in the API (manifest, status)
    launcher    the script that enters the namespaces, builds the filesystem view and execs (stdlib only)
    volumes     volumes as host directories          envs     a container's environment
    probes      readiness/liveness/startup           hosts    Services → /etc/hosts
    network     bridge, per-pod netns, clean-up      images   image → entrypoint, cmd, env, PATH
    api         list+watch informers, verbs          apiserver + certs   the API on the bridge over TLS

Use: ``from tests.support.kubelet import kubelet`` in a ``conftest.py`` next to ``kube_api`` (see tests/kubelet/).
"""

from __future__ import annotations

from tests.support.kubelet.fixture import kubelet, require, run_kubelet, unavailable_reason
from tests.support.kubelet.images import Image
from tests.support.kubelet.node import Node, PodEvent, PodInfo
from tests.support.kubelet.pods import Settings

Kubelet = Node

__all__ = ["Image", "Kubelet", "Node", "PodEvent", "PodInfo", "Settings", "kubelet", "require", "run_kubelet",
           "unavailable_reason"]
