"""Storage whose claims bind: a default StorageClass and static PersistentVolumes the launcher makes.

There is no provisioner: the class is ``kubernetes.io/no-provisioner`` with ``Immediate`` binding, and the launcher
makes a few ``hostPath`` volumes (directories under the cluster's own) that the real PersistentVolume controller
binds claims to. Without a node, ``WaitForFirstConsumer`` would never bind; a volume is ``Retain``ed, since nothing
could delete it. A claim asks at most :data:`SIZE`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CLASS", "SIZE", "manifests"]

CLASS = "standard"
SIZE = "10Gi"


def manifests(directory: Path, count: int = 8) -> list[dict[str, Any]]:
    """The StorageClass (the cluster's default) and ``count`` volumes under ``directory``."""
    storage_class = {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain",
    }
    volumes = [{
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"local-{i}"},
        "spec": {"capacity": {"storage": SIZE}, "accessModes": ["ReadWriteOnce"], "storageClassName": CLASS,
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": str(directory / f"local-{i}"),
                                                                        "type": "DirectoryOrCreate"}},
    } for i in range(count)]
    return [storage_class, *volumes]
