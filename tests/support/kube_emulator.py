"""An emulated Kubernetes API server for tests: kmock 0.8's ``KubernetesEmulator`` with its gaps closed.

kmock gives us an aiohttp server, API discovery, a request log (:meth:`KubeEmulator.requests_since`,
:meth:`KubeEmulator.writes`) and versioned object storage (``emulator.objects``). As released it is not
enough for kopf, ``kubectl`` or the ``kubernetes`` client (docs/development.md, "The emulated Kubernetes API"), so
:class:`KubeEmulator` serves every request for a known resource itself and closes the six gaps:

1. ``/api/v1/namespaces[/NAME]`` is parsed as the ``namespaces`` resource (kmock parses it as a namespace);
2. objects get ``uid``, ``resourceVersion``, ``creationTimestamp`` and ``generation`` (bumped on spec
   changes); JSON patch ``test`` failures answer 422 and a stale ``metadata.resourceVersion`` answers 409;
3. watches honour ``resourceVersion`` (replaying what happened after it from an event log) and subscribe
   before replaying, so nothing is lost in between; ``timeoutSeconds`` ends them;
4. lists carry ``kind``/``apiVersion``/``resourceVersion``; core discovery says ``groupVersion: v1``;
5. watch responses are ``application/json`` lines (client-go's ``get -w`` / ``wait`` need that);
6. label and field selectors (``metadata.name``, ``metadata.namespace``) filter lists and watches.

It also does what the real API server does and kopf-based tests lean on: ``generateName``, finalizers
and ``deletionTimestamp``, status-subresource isolation, PUT (replace), owner-reference garbage
collection (foreground-free, immediate), and, for our own CRDs in ``crds/``, structural defaulting and
schema + CEL validation via :mod:`tests.support.crd_validation`, answering 422 like the API server.
It answers ``kubectl get``'s Table requests too, with a CRD's ``additionalPrinterColumns`` (so
``kubectl get agents`` shows ACCEPTED and READY). Still missing: server-side apply, strategic merge
semantics (treated as merge patch), protobuf request bodies (``kubectl create secret`` sends protobuf:
create built-in objects with the ``kubernetes`` client or ``kubectl apply``), mutating admission, real RBAC roles.

Identity (:mod:`tests.support.kube_identity`): a request's bearer token picks its user (:meth:`KubeEmulator.add_user`,
:meth:`KubeEmulator.add_service_account`); no token or an unknown one is the admin :attr:`KubeEmulator.username`
(``system:masters``) unless :attr:`KubeEmulator.require_auth` (401). ``SelfSubjectReview`` and ``TokenReview``
are answered; :meth:`KubeEmulator.enforce_rbac` and :meth:`KubeEmulator.grant` give a minimal RBAC (403 worded
like the API server's). ValidatingAdmissionPolicies (:meth:`KubeEmulator.add_admission_policy`,
:mod:`tests.support.admission`) are evaluated on CREATE, UPDATE/PATCH (after the patch and the status-subresource
isolation, before storing; a ``/status`` write is matched as the ``status`` subresource) and DELETE (no new object,
the stored one as ``oldObject``); the garbage collection a DELETE sets off is the server's own and not admitted.

Denial and trouble, for tests of clients: :meth:`KubeEmulator.forbid` makes matching requests answer 403 like
RBAC would (or another status); :meth:`KubeEmulator.compact`
forgets the watch history (as etcd compaction or an API server restart does): open watches end and
resuming one from an older resourceVersion answers ``410 Gone``; :attr:`KubeEmulator.watch_delay` holds
every watch event back that many seconds (a watch running behind, as under load).

Payload mechanics (merge patch, selectors, Tables) live in :mod:`tests.support.kube_wire`; serving it on
127.0.0.1 from a thread in :mod:`tests.support.kube_server`; pytest fixtures in
:mod:`tests.support.kube_fixtures`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import json
import re
import secrets
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import kmock
import yaml
from kmock._internal import enums, parsing, references, rendering

from tests.support import crd_validation
from tests.support import kube_identity as identity
from tests.support import kube_wire as wire
from tests.support.admission import Admission

__all__ = ["KubeEmulator"]

Key = tuple[references.resource, str | None, str]
_CORE_NAMESPACES = re.compile(r"^/api/v1/namespaces(?:/(?P<name>[^/]+)(?:/(?P<sub>status|finalize))?)?/?$")
_WRITES = {"POST", "PUT", "PATCH", "DELETE"}
# Discovery, answered directly: kmock's DSL would test the request against every payload's filter, and each
# test walks the whole request log (quadratic over a long run). Same patterns and answers as kmock's fallbacks.
_DISCOVERY = (
    (re.compile(r"/apis/[^/]+/[^/]+/?"), "_serve_version"),
    (re.compile(r"/apis/[^/]+/?"), "_serve_group"),
    (re.compile(r"/api/[^/]+/?"), "_serve_version"),
    (re.compile(r"/version/?"), "_serve_server_version"),
    (re.compile(r"/apis/?"), "_serve_apis"),
    (re.compile(r"/api/?"), "_serve_api"),
    (re.compile(r"/"), "_serve_root"),
)


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(eq=False)
class _Watcher:
    resource: references.resource
    namespace: str | None
    name: str | None
    labels: str
    fields: str
    queue: asyncio.Queue[tuple[float, dict[str, Any]]] = field(default_factory=asyncio.Queue)  # (emitted at, event)


@attrs.define(kw_only=True)
class KubeEmulator(identity.IdentityMixin, kmock.KubernetesEmulator):
    """kmock's emulator with the gaps closed; see the module docstring. Load CRDs with :meth:`add_crd`."""

    validate_custom_resources: bool = True
    username: str = "tester"  # the admin: who a request without one of our tokens is
    require_auth: bool = False  # refuse (401) a request without one of our tokens
    watch_delay: float = 0.0  # seconds each watch event is held back, like a lagging watch cache
    _forbidden: list[tuple[str, re.Pattern[str], int]] = attrs.field(factory=list, init=False)
    _compacted: int = attrs.field(default=0, init=False)
    _rv: int = attrs.field(default=0, init=False)
    _log: list[tuple[int, references.resource, dict[str, Any]]] = attrs.field(factory=list, init=False)
    _watchers: set[_Watcher] = attrs.field(factory=set, init=False)  # type: ignore[arg-type]
    _validated: dict[references.resource, str] = attrs.field(factory=dict, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    _columns: dict[references.resource, list[dict[str, Any]]] = attrs.field(factory=dict, init=False)
    identities: identity.Identities = attrs.field(factory=identity.Identities, init=False)
    admission: Admission = attrs.field(factory=Admission, init=False)
    admission_audit: list[str] = attrs.field(factory=list, init=False)  # what Audit-action bindings recorded
    _warnings: list[str] = attrs.field(factory=list, init=False)  # Warn-action results of the write being served

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        with warnings.catch_warnings():  # kmock 0.8 uses importlib.resources.read_binary
            warnings.simplefilter("ignore", DeprecationWarning)
            self.resources.load_bundled()
        self.seed("v1/namespaces", {"metadata": {"name": "default"}})

    # -- set-up ---------------------------------------------------------------------------------------

    def add_crd(self, crd: dict[str, Any]) -> None:
        """Serve a CustomResourceDefinition's resources (discovery, CRUD, watch, validation)."""
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            res = references.resource(spec["group"], version["name"], spec["names"]["plural"])
            verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
            self.resources[res] = references.ResourceInfo(
                kind=spec["names"]["kind"],
                singular=spec["names"].get("singular", spec["names"]["kind"].lower()),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                verbs=verbs,
                shortnames=spec["names"].get("shortNames", []),
                categories=spec["names"].get("categories", []),
                subresources=list(version.get("subresources", {})),
            )
            if self.validate_custom_resources and spec["names"]["kind"] in crd_validation.load_crds():
                self._validated[res] = spec["names"]["kind"]
            self._columns[res] = list(version.get("additionalPrinterColumns", []))

    def add_crds_from(self, directory: Path) -> None:
        for path in sorted(directory.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc and doc.get("kind") == "CustomResourceDefinition":
                    self.add_crd(doc)

    def seed(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a copy of an object directly (no request logged, no event); returns the stored object."""
        res = references.resource(resource)
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        self._stamp_new(res, obj)
        self._objects[res, meta.get("namespace"), meta["name"]] = obj
        return obj

    def forbid(self, method: str, path_regex: str, status: int = 403) -> None:
        """Answer ``status`` (403 Forbidden, or e.g. 503 for an API in trouble) to ``method`` requests whose
        path matches ``path_regex`` (``re.search``)."""
        self._forbidden.append((method.upper(), re.compile(path_regex), status))

    def allow_all(self) -> None:
        self._forbidden.clear()

    # -- admission (identity and RBAC: identity.IdentityMixin) ------------------------------------------

    def add_admission_policy(self, policy: dict[str, Any], binding: dict[str, Any]) -> None:
        """Evaluate a ValidatingAdmissionPolicy, as bound by ``binding``, on every matching CREATE, UPDATE and DELETE."""
        self.admission.add(policy, binding)

    def add_admission_documents(self, docs: list[dict[str, Any]]) -> int:
        """Load every policy and binding among ``docs`` (e.g. the rendered chart); returns the number of bindings."""
        return self.admission.add_documents(docs)

    def compact(self) -> None:
        """Forget the event history: open watches end; resuming from an older version answers 410 Gone."""
        self._compacted = self._rv
        self._log.clear()
        for watcher in list(self._watchers):
            watcher.queue.put_nowait((0.0, {"type": "_END"}))

    @property
    def open_watches(self) -> int:
        return len(self._watchers)

    def stop_watches(self) -> None:
        """Make every open watch stream end within a second (call before shutting the server down)."""
        self._closing = True

    # -- introspection for tests ---------------------------------------------------------------------

    @property
    def request_count(self) -> int:
        return len(self._requests)

    def requests_since(self, since: int = 0) -> list[rendering.Request]:
        """The request log from request number ``since`` (see :attr:`request_count`) on."""
        return list(self._requests)[since:]

    def writes(self, since: int = 0) -> list[rendering.Request]:
        """Requests that could change state (POST/PUT/PATCH/DELETE), from request number ``since``."""
        return [r for r in self.requests_since(since) if str(r.method.value).upper() in _WRITES]

    def get_object(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        key = (references.resource(resource), namespace, name)
        if key not in self._objects or self._objects[key].deleted:
            return None
        return copy.deepcopy(self._objects[key].raw)

    # -- request entry point ---------------------------------------------------------------------------

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        method = raw_request.method.upper()
        user = self.caller(raw_request.headers.get("Authorization"))
        if user is None:
            return await self._render_error(kmock.KubernetesError(status=401, reason="Unauthorized", message="Unauthorized"))
        for verb, pattern, status in self._forbidden:
            if verb == method and pattern.search(raw_request.path):
                return await self._render_error(kmock.KubernetesError(
                    status=status, reason="Forbidden" if status == 403 else "ServiceUnavailable",
                    message=f'User "{user.username}" cannot {method.lower()} {raw_request.path}: refused by the test',
                ))
        if method == "POST" and raw_request.path.rstrip("/") in identity.REVIEWS:
            try:
                return aiohttp.web.json_response(await self._review(raw_request, user), status=201)
            except kmock.KubernetesError as exc:
                return await self._render_error(exc)
        if _CORE_NAMESPACES.match(raw_request.path):
            return await self._call_namespaces(raw_request)
        return await super().__call__(raw_request)

    async def _call_namespaces(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """kmock's path parser reads ``/api/v1/namespaces/x`` as namespace ``x``; build the request here."""
        match = _CORE_NAMESPACES.match(raw_request.path)
        assert match is not None
        body = await raw_request.read()
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = None
        name = match.group("name")
        method = enums.method(raw_request.method)
        path = parsing.ParsedPath("", "v1", "namespaces", None, name, match.group("sub"))
        request = rendering.Request(
            id=len(self._requests), method=raw_request.method, url=raw_request.url,
            params=dict(raw_request.query), headers=dict(raw_request.headers), body=body,
            text=body.decode(errors="replace"), data=data,
            action=parsing.guess_k8s(path, method, dict(raw_request.query)),
            resource=references.resource("", "v1", "namespaces"), namespace=None, name=name,
            subresource=match.group("sub"), raw_request=raw_request,
        )
        self._requests.append(request)
        try:
            return await self._handle(request)
        except Exception as exc:
            return await self._render_error(exc)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        res = request.resource
        if res is None or res.plural is None or self._info(res) is None:
            if str(request.method.value).upper() == "GET":
                for pattern, serve in _DISCOVERY:
                    if pattern.fullmatch(request.url.path):
                        payload = await getattr(self, serve)(request)
                        if isinstance(payload, dict):
                            return aiohttp.web.json_response(payload)
                        break
            return await kmock.KubernetesScaffold._handle(self, request)  # the DSL
        method = str(request.method.value).upper()
        watch = method == "GET" and request.params.get("watch") in ("true", "1")
        self._authorize(request, identity.verb_of(method, request.name, watch))
        if watch:
            return await self._watch(request)
        async with self._lock:
            self._warnings = []
            if method == "GET" and request.name is None:
                payload = self._list(request)
            elif method == "GET":
                payload = self._fetch(request)
            elif method == "POST" and request.name is None:
                payload = await self._create(request)
            elif method in ("PATCH", "PUT") and request.name is not None:
                payload = await self._modify(request, replace=method == "PUT")
            elif method == "DELETE" and request.name is not None:
                payload = await self._delete(request)
            else:
                raise kmock.KubernetesError(status=405, reason="MethodNotAllowed", message=f"{method} {request.url.path}")
            warnings, self._warnings = self._warnings, []
        status = 201 if method == "POST" else 200
        if method == "GET" and wire.wants_table(request):
            payload = self._table(res, payload.get("items", [payload]), payload["metadata"].get("resourceVersion"))
        response = aiohttp.web.json_response(payload, status=status)
        for warning in warnings:  # as the API server sends a Warn-action policy's failures; kubectl prints them
            response.headers.add("Warning", f'299 - "{warning}"')
        return response

    # -- discovery fix ----------------------------------------------------------------------------------

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_version(request)
        if isinstance(payload, dict) and payload.get("groupVersion", "").startswith("/"):
            payload["groupVersion"] = payload["groupVersion"][1:]
        return payload

    # -- verbs ----------------------------------------------------------------------------------------

    def _info(self, res: references.resource) -> references.ResourceInfo | None:
        # A plain dict lookup: ``res in self.resources`` type-checks the key against a Protocol on every call.
        return self.resources._resources.get(res)

    def _key(self, request: rendering.Request, name: str) -> Key:
        assert request.resource is not None
        info = self._info(request.resource)
        namespace = request.namespace if info is None or info.namespaced is not False else None
        return (request.resource, namespace, name)

    def _live(self, key: Key) -> dict[str, Any] | None:
        if key not in self._objects or self._objects[key].deleted:
            return None
        return self._objects[key].raw

    def _matches(self, request_ns: str | None, name: str | None, labels: str, fields: str, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata", {})
        if request_ns is not None and meta.get("namespace") != request_ns:
            return False
        if name is not None and meta.get("name") != name:
            return False
        if labels and not wire.label_match(meta.get("labels") or {}, labels):
            return False
        return not fields or wire.field_match(obj, fields)

    def _list(self, request: rendering.Request) -> dict[str, Any]:
        res = request.resource
        assert res is not None
        labels, fields = request.params.get("labelSelector", ""), request.params.get("fieldSelector", "")
        items = [
            obj.raw
            for (r, _, _), obj in list(self._objects.items())
            if r == res and not obj.deleted and self._matches(request.namespace, None, labels, fields, obj.raw)
        ]
        items.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
        info = self._info(res)
        kind = info.kind if info and info.kind else res.plural.capitalize()
        return {
            "kind": f"{kind}List",
            "apiVersion": self._api_version(res),
            "metadata": {"resourceVersion": str(self._rv)},
            "items": items,
        }

    def _table(self, res: references.resource, objs: list[dict[str, Any]], rv: str | None) -> dict[str, Any]:
        return wire.table(self._columns.get(res), str(self._rv), objs, rv)

    def _fetch(self, request: rendering.Request) -> dict[str, Any]:
        assert request.name is not None
        obj = self._live(self._key(request, request.name))
        if obj is None:
            raise self._not_found(request)
        return obj

    async def _create(self, request: rendering.Request) -> dict[str, Any]:
        res = request.resource
        assert res is not None
        obj = copy.deepcopy(request.data) if isinstance(request.data, dict) else {}
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise kmock.KubernetesError(status=422, reason="Invalid", message="metadata.name or generateName is required")
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        key = self._key(request, meta["name"])
        if key[1] is not None:
            meta["namespace"] = key[1]
        if self._live(key) is not None:
            raise kmock.KubernetesError(
                status=409, reason="AlreadyExists", message=f'{res.plural} "{meta["name"]}" already exists'
            )
        info = self._info(res)
        if info is not None and "status" in info.subresources and self._validated.get(res):
            obj.pop("status", None)  # custom resources: status is set through /status only
        self._stamp_new(res, obj)
        obj = self._validate(res, obj)
        self._admit(request, "CREATE", obj, None)
        if key in self._objects:
            self._objects[key].create(obj)
        else:
            self._objects[key] = obj
        await self._emit(res, "ADDED", obj)
        return obj

    async def _modify(self, request: rendering.Request, *, replace: bool) -> dict[str, Any]:
        res = request.resource
        assert res is not None and request.name is not None
        key = self._key(request, request.name)
        current = self._live(key)
        if current is None:
            raise self._not_found(request)
        content_type = request.headers.get("Content-Type", "")
        data = request.data
        try:
            if replace or ("json-patch" not in content_type and not isinstance(data, list)):
                sent_rv = (data or {}).get("metadata", {}).get("resourceVersion") if isinstance(data, dict) else None
                if sent_rv and sent_rv != current["metadata"].get("resourceVersion"):
                    raise kmock.KubernetesError(
                        status=409, reason="Conflict",
                        message=f'Operation cannot be fulfilled on {res.plural} "{request.name}": the object has been modified',
                    )
                wanted = copy.deepcopy(data) if replace else wire.merge_patch(current, data or {})
            else:
                wanted = jsonpatch.apply_patch(current, data or [], in_place=False)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise kmock.KubernetesError(status=422, reason="Invalid", message=f"the patch cannot be applied: {exc}") from None
        new = self._isolate(res, request.subresource, current, wanted)
        if new == current:
            self._admit(request, "UPDATE", current, current)  # admitted first, as in Kubernetes
            return current  # a no-op write changes nothing and emits nothing, as in Kubernetes
        meta = new["metadata"]
        meta["resourceVersion"] = self._next_rv()
        strip = ("metadata", "status")
        if {k: v for k, v in new.items() if k not in strip} != {k: v for k, v in current.items() if k not in strip}:
            meta["generation"] = int(current["metadata"].get("generation", 1)) + 1
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._admit(request, "UPDATE", new, current)
            await self._remove(key, new)
            return new
        new = self._validate(res, new, current)
        self._admit(request, "UPDATE", new, current)
        self._objects[key].create(new)
        await self._emit(res, "MODIFIED", new)
        return new

    async def _delete(self, request: rendering.Request) -> dict[str, Any]:
        assert request.name is not None
        key = self._key(request, request.name)
        current = self._live(key)
        if current is None:
            raise self._not_found(request)
        self._admit(request, "DELETE", None, current)  # the garbage collection below is the server's own: not admitted
        return await self._delete_key(key, current)

    async def _delete_key(self, key: Key, current: dict[str, Any]) -> dict[str, Any]:
        meta = current["metadata"]
        if meta.get("deletionTimestamp"):
            return current
        if meta.get("finalizers"):
            new = copy.deepcopy(current)
            new["metadata"]["deletionTimestamp"] = _now()
            new["metadata"]["resourceVersion"] = self._next_rv()
            self._objects[key].create(new)
            await self._emit(key[0], "MODIFIED", new)
            return new
        await self._remove(key, current)
        return current

    async def _remove(self, key: Key, last: dict[str, Any]) -> None:
        """Delete for real, then collect the garbage: dependents whose owner this object was."""
        last = copy.deepcopy(last)
        last["metadata"]["resourceVersion"] = self._next_rv()
        self._objects[key].create(last)
        self._objects[key].delete()
        await self._emit(key[0], "DELETED", last)
        uid = last["metadata"].get("uid")
        for other_key, other in list(self._objects.items()):
            if other.deleted:
                continue
            owners = other.raw.get("metadata", {}).get("ownerReferences") or []
            if uid and any(o.get("uid") == uid for o in owners):
                await self._delete_key(other_key, other.raw)

    # -- object bookkeeping ---------------------------------------------------------------------------
    #
    # A stored object is never changed in place: every write stores a fresh dict (built from a deep copy of the
    # request or of the current object). So reads, list items and watch events share the stored dicts instead
    # of copying them; responses are serialised before anything else runs. Only :meth:`get_object` copies,
    # since tests may change what it returns.

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _api_version(self, res: references.resource) -> str:
        return f"{res.group}/{res.version}" if res.group else str(res.version)

    def _stamp_new(self, res: references.resource, obj: dict[str, Any]) -> None:
        info = self._info(res)
        meta = obj.setdefault("metadata", {})
        meta["uid"] = str(uuid.uuid4())
        meta["resourceVersion"] = self._next_rv()
        meta["creationTimestamp"] = _now()
        meta["generation"] = 1
        meta.pop("deletionTimestamp", None)
        obj.setdefault("apiVersion", self._api_version(res))
        if info is not None and info.kind:
            obj.setdefault("kind", info.kind)

    def _isolate(
        self, res: references.resource, sub: str | None, current: dict[str, Any], wanted: dict[str, Any]
    ) -> dict[str, Any]:
        """Status-subresource isolation: /status changes only status; the main resource never changes it."""
        info = self._info(res)
        new = copy.deepcopy(wanted)
        new["metadata"] = {**wanted.get("metadata", {})}
        for immutable in ("uid", "creationTimestamp", "resourceVersion", "generation", "deletionTimestamp", "name", "namespace"):
            if immutable in current["metadata"]:
                new["metadata"][immutable] = current["metadata"][immutable]
            else:
                new["metadata"].pop(immutable, None)
        if info is None or "status" not in info.subresources:
            return new
        if sub == "status":
            out = copy.deepcopy(current)
            if "status" in new:
                out["status"] = new["status"]
            else:
                out.pop("status", None)
            return out
        if "status" in current:
            new["status"] = copy.deepcopy(current["status"])
        else:
            new.pop("status", None)
        return new

    def _validate(self, res: references.resource, obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
        """Defaults and validation; ``old``: the stored object an update replaces (for CEL transition rules)."""
        kind = self._validated.get(res)
        if kind is None:
            return obj
        obj = crd_validation.apply_defaults(crd_validation.schema_for(kind), obj)
        problems = crd_validation.problems(obj, old)
        if problems:
            name = obj.get("metadata", {}).get("name")
            raise kmock.KubernetesError(
                status=422, reason="Invalid",
                message=f'{kind}.{res.group} "{name}" is invalid: ' + "; ".join(problems),
                details={"name": name, "group": res.group, "kind": kind,
                         "causes": [{"reason": "FieldValueInvalid", "message": p} for p in problems]},
            )
        return obj

    def _admit(
        self, request: rendering.Request, operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None,
    ) -> None:
        """Run the loaded ValidatingAdmissionPolicies; a Deny failure refuses the write (nothing is stored). DELETE has
        no ``obj`` (CEL's ``object`` is null) and the stored object as ``old``."""
        res = request.resource
        if not self.admission.bindings or res is None:
            return
        info = self._info(res)
        meta = (obj if obj is not None else old or {}).get("metadata", {})
        review = self.admission.review(
            operation=operation, group=res.group or "", version=res.version or "", resource=res.plural or "",
            subresource=request.subresource, kind=(info.kind if info else None) or "", obj=obj, old=old,
            user=self._user(request).as_dict(), namespace=meta.get("namespace"), name=meta.get("name"),
        )
        self._warnings += review.warnings
        self.admission_audit += review.audit
        if review.denial is not None:
            denial = review.denial
            raise kmock.KubernetesError(
                status=denial.status, reason=denial.reason, message=denial.message,
                details={"name": meta.get("name", ""), "group": res.group, "kind": res.plural,
                         "causes": [{"message": denial.message}]},
            )

    def _not_found(self, request: rendering.Request) -> kmock.KubernetesError:
        plural = request.resource.plural if request.resource else "object"
        return kmock.KubernetesError(status=404, reason="NotFound", message=f'{plural} "{request.name}" not found')

    # -- watching ---------------------------------------------------------------------------------------

    async def _emit(self, res: references.resource, kind: str, obj: dict[str, Any]) -> None:
        event = {"type": kind, "object": obj}
        now = asyncio.get_running_loop().time()
        self._log.append((int(obj["metadata"]["resourceVersion"]), res, event))
        for watcher in list(self._watchers):
            if watcher.resource == res and self._sees(watcher, obj):
                watcher.queue.put_nowait((now, event))

    async def _gone(self, request: rendering.Request, since: str) -> aiohttp.web.StreamResponse:
        """A watch from a compacted version: one ERROR event with a 410 Status, as the API server sends it."""
        assert request._raw_request is not None
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request._raw_request)
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
                  "message": f"too old resource version: {since} ({self._compacted})"}
        await response.write(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
        await response.write_eof()
        return response

    def _sees(self, watcher: _Watcher, obj: dict[str, Any]) -> bool:
        return self._matches(watcher.namespace, watcher.name, watcher.labels, watcher.fields, obj)

    async def _watch(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        res = request.resource
        assert res is not None and request._raw_request is not None
        watcher = _Watcher(
            res, request.namespace, request.name,
            request.params.get("labelSelector", ""), request.params.get("fieldSelector", ""),
        )
        since = request.params.get("resourceVersion", "")
        if since and since != "0" and int(since) < self._compacted:
            return await self._gone(request, since)
        async with self._lock:  # subscribe and take the snapshot atomically: nothing falls in between
            self._watchers.add(watcher)
            if since and since != "0":
                backlog = [e for rv, r, e in self._log if r == res and rv > int(since) and self._sees(watcher, e["object"])]
            else:
                listed = self._list(request)["items"]
                backlog = [{"type": "ADDED", "object": o} for o in listed if watcher.name in (None, o["metadata"]["name"])]
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request._raw_request)
        timeout = float(request.params.get("timeoutSeconds", 0) or 0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        table = wire.wants_table(request)

        def encode(event: dict[str, Any]) -> bytes:
            if table:
                event = {"type": event["type"], "object": self._table(res, [event["object"]], None)}
            return json.dumps(event).encode() + b"\n"

        try:
            for event in backlog:
                await response.write(encode(event))
            while not self._closing and (deadline is None or loop.time() < deadline):
                transport = request._raw_request.transport
                if transport is None or transport.is_closing():
                    break
                try:
                    emitted, event = await asyncio.wait_for(watcher.queue.get(), timeout=0.5)
                except TimeoutError:
                    continue
                if event["type"] == "_END":
                    break
                if self.watch_delay and (late := emitted + self.watch_delay - loop.time()) > 0:
                    await asyncio.sleep(late)
                await response.write(encode(event))
            with contextlib.suppress(ConnectionError, RuntimeError):
                await response.write_eof()
        except (ConnectionError, RuntimeError):
            pass
        finally:
            self._watchers.discard(watcher)
        return response


