"""Validate custom resources offline the way the API server would: structural defaults, the CRD's
``openAPIV3Schema`` (jsonschema) and its CEL ``x-kubernetes-validations`` (cel-python).

Used by the CRD tests and available to the emulated API server, which has no validation of its own.

The emulated API server validates every write, so the work is cached where that changes no answer: one
compiled ``jsonschema`` validator per kind, one compiled CEL program per rule, and each rule's verdict per
value it was evaluated on (a CEL rule without ``oldSelf`` is a pure function of ``self``; the key is the
value's canonical JSON, and for a transition rule the old value's too). Defaults are applied once per write
(:func:`problems` takes an already defaulted object).

Transition rules follow the API server: given the stored object (``old``, on an update), ``oldSelf`` is the
value at the same place in it -- through object properties and ``x-kubernetes-list-type: map`` items (matched
by their keys), not through other lists. A rule that uses ``oldSelf`` is skipped where there is none (a create),
unless it sets ``optionalOldSelf: true``: then ``oldSelf`` is an optional (``hasValue()``, ``value()``,
``orValue(x)``), empty on a create. A rule's ``fieldPath`` names the field its failure is reported at.
Ratcheting (an unchanged invalid value passes) is not modelled.
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml

CRD_DIR = Path(__file__).resolve().parents[2] / "crds"


@functools.cache
def load_crds() -> dict[str, dict[str, Any]]:
    """CRDs in ``crds/`` by kind."""
    out = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        out[crd["spec"]["names"]["kind"]] = crd
    return out


def schema_for(kind: str) -> dict[str, Any]:
    return load_crds()[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Fill structural defaults (what the API server does before validation)."""
    if isinstance(value, dict) and schema.get("type") == "object":
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(sub, value[name])
    elif isinstance(value, list) and "items" in schema:
        return [apply_defaults(schema["items"], v) for v in value]
    return value


@functools.cache
def _validator(kind: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(schema_for(kind))


def schema_errors(obj: dict[str, Any]) -> list[str]:
    errors = sorted(_validator(obj["kind"]).iter_errors(obj), key=lambda e: list(e.absolute_path))
    return [f"{_path(e.absolute_path)}: {e.message}" for e in errors]


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


class _Optional:
    """CEL's optional, as ``oldSelf`` is under ``optionalOldSelf: true`` (empty on a create)."""

    def __init__(self, *value: Any) -> None:
        self.present = bool(value)
        self.inner = value[0] if value else None


def _has_value(opt: _Optional) -> Any:
    return celpy.celtypes.BoolType(opt.present)


def _value(opt: _Optional) -> Any:
    if not opt.present:
        raise ValueError("optional.none() dereference")
    return opt.inner


def _or_value(opt: _Optional, default: Any) -> Any:
    return opt.inner if opt.present else default


_OPTIONAL_FUNCTIONS = {"hasValue": _has_value, "value": _value, "orValue": _or_value}
_ABSENT = object()  # no old value at this place (a create, or an item of a list that is not a map)


@functools.cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule), functions=_OPTIONAL_FUNCTIONS)


def cel_errors(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """Messages of every CEL rule that evaluates to false (or fails to evaluate) on ``obj``; ``old``: the stored
    object an update replaces (for transition rules)."""
    out: list[str] = []
    _walk(schema_for(obj["kind"]), obj, _ABSENT if old is None else old, "", out)
    return out


_VERDICTS_MAX = 4096
_verdicts: OrderedDict[tuple[str, str], str | None] = OrderedDict()  # (rule, JSON of self) -> failure or None
_verdicts_lock = threading.Lock()  # the emulator validates in its own thread, tests in theirs


def _evaluate(check: dict[str, Any], value: Any, old: Any = _ABSENT) -> str | None:
    """``None`` when ``check`` holds on ``value`` (and ``old``, for a transition rule), else its message; memoised
    per (rule, value, old value)."""
    rule = check["rule"]
    activation: dict[str, Any] = {}
    memo_old = ""
    if "oldSelf" in rule:
        if check.get("optionalOldSelf"):
            activation["oldSelf"] = _Optional() if old is _ABSENT else _Optional(celpy.json_to_cel(old))
        elif old is _ABSENT:
            return None  # a transition rule is not evaluated without an old value
        else:
            activation["oldSelf"] = celpy.json_to_cel(old)
        memo_old = "absent" if old is _ABSENT else json.dumps(old, sort_keys=True, separators=(",", ":"), default=str)
    try:
        key: tuple[str, str] | None = (rule, json.dumps(value, sort_keys=True, separators=(",", ":")) + memo_old)
    except (TypeError, ValueError):  # not JSON (e.g. a YAML timestamp in a test document): not memoised
        key = None
    if key is not None:
        with _verdicts_lock:
            if key in _verdicts:
                _verdicts.move_to_end(key)
                return _verdicts[key]
    failure: str | None = None
    try:
        ok = _program(rule).evaluate({"self": celpy.json_to_cel(value), **activation})
    except Exception as exc:  # a rule that cannot evaluate rejects the object, as in the API server
        failure = f"{check.get('message', rule)} ({exc})"
    else:
        if not bool(ok):
            failure = check.get("message", rule)
    if key is None:
        return failure
    with _verdicts_lock:
        _verdicts[key] = failure
        if len(_verdicts) > _VERDICTS_MAX:
            _verdicts.popitem(last=False)
    return failure


def _walk(schema: dict[str, Any], value: Any, old: Any, path: str, out: list[str]) -> None:
    for check in schema.get("x-kubernetes-validations", []):
        failure = _evaluate(check, value, old)
        if failure is not None:
            at = path + check["fieldPath"] if check.get("fieldPath") and path else (path or "<root>")
            out.append(f"{at}: {failure}")
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                old_value = old.get(name, _ABSENT) if isinstance(old, dict) else _ABSENT
                _walk(sub, value[name], old_value, f"{path}.{name}" if path else name, out)
    elif isinstance(value, list) and "items" in schema:
        keys = schema.get("x-kubernetes-list-map-keys") if schema.get("x-kubernetes-list-type") == "map" else None
        olds: dict[Any, Any] = {}
        if keys and isinstance(old, list):
            olds = {_map_key(item, keys): item for item in old if isinstance(item, dict)}
        for i, item in enumerate(value):
            old_item = olds.get(_map_key(item, keys), _ABSENT) if keys and isinstance(item, dict) else _ABSENT
            _walk(schema["items"], item, old_item, f"{path}[{i}]", out)


def _map_key(item: dict[str, Any], keys: list[str]) -> str:
    return json.dumps([item.get(k) for k in keys], default=str)


def validate(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """All schema and CEL problems of one object after defaulting; empty when the API server would accept it.
    ``old``: the stored object, when ``obj`` is an update of it."""
    kind_schema = schema_for(obj["kind"])
    stored = None if old is None else apply_defaults(kind_schema, copy.deepcopy(old))
    return problems(apply_defaults(kind_schema, copy.deepcopy(obj)), stored)


def problems(defaulted: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """:func:`validate` for an object whose defaults are already applied (it is not copied or changed)."""
    return schema_errors(defaulted) + list_errors(defaulted) + cel_errors(defaulted, old)


def list_errors(obj: dict[str, Any]) -> list[str]:
    """Duplicates in ``x-kubernetes-list-type: set`` and ``map`` lists, worded as the API server words them (it
    refuses them before any CEL rule could; found by running the same documents on a real one, tests/cluster)."""
    out: list[str] = []
    _duplicates(schema_for(obj["kind"]), obj, "", out)
    return out


def _duplicates(schema: dict[str, Any], value: Any, path: str, out: list[str]) -> None:
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                _duplicates(sub, value[name], f"{path}.{name}" if path else name, out)
    elif isinstance(value, list) and "items" in schema:
        kind, keys = schema.get("x-kubernetes-list-type"), schema.get("x-kubernetes-list-map-keys") or []
        seen: set[str] = set()
        for i, item in enumerate(value):
            identity = {k: item.get(k) for k in keys} if kind == "map" and isinstance(item, dict) else item
            text = json.dumps(identity, separators=(",", ":"), sort_keys=True, default=str)
            if kind in ("set", "map") and text in seen:
                out.append(f"{path}[{i}]: Duplicate value: {text}")
            seen.add(text)
            _duplicates(schema["items"], item, f"{path}[{i}]", out)
