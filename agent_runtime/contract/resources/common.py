"""Shapes shared by every Gatehouse custom resource: object metadata, conditions, secret references.

Spec models use snake_case attributes with camelCase aliases, so Python code reads naturally while the
YAML a user writes (and the CRD schema in ``crds/``) stays Kubernetes-style.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

GROUP = "gatehouse.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


class SpecModel(BaseModel):
    """Base for CRD spec fragments: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ObjectMeta(BaseModel):
    """The part of Kubernetes metadata Gatehouse reads; everything else is kept but ignored."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str = Field(min_length=1)
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class SecretKeyRef(SpecModel):
    """A key of a Secret in the same namespace. Only the reference travels; never the value."""

    name: str = Field(min_length=1)
    key: str = Field(min_length=1)


class Condition(SpecModel):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class Resource(BaseModel):
    """A whole custom resource: apiVersion, kind, metadata and a typed spec (set by subclasses)."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str
    metadata: ObjectMeta
    status: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace
