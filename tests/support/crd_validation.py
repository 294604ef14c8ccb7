"""Validate custom resources offline the way the API server would: structural defaults, the CRD's
``openAPIV3Schema`` (jsonschema) and its CEL ``x-kubernetes-validations`` (cel-python).

Used by the CRD tests and available to the emulated API server, which has no validation of its own.

The emulated API server validates every write, so the work is cached where that changes no answer: one
compiled ``jsonschema`` validator per kind, one compiled CEL program per rule, and each rule's verdict per
value it was evaluated on (a CEL rule without ``oldSelf`` is a pure function of ``self``; the key is the
value's canonical JSON). Defaults are applied once per write (:func:`problems` takes an already defaulted
object).
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


@functools.cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def cel_errors(obj: dict[str, Any]) -> list[str]:
    """Messages of every CEL rule that evaluates to false (or fails to evaluate) on ``obj``."""
    out: list[str] = []
    _walk(schema_for(obj["kind"]), obj, "", out)
    return out


_VERDICTS_MAX = 4096
_verdicts: OrderedDict[tuple[str, str], str | None] = OrderedDict()  # (rule, JSON of self) -> failure or None
_verdicts_lock = threading.Lock()  # the emulator validates in its own thread, tests in theirs


def _evaluate(check: dict[str, Any], value: Any) -> str | None:
    """``None`` when ``check`` holds on ``value``, else its message; memoised per (rule, value)."""
    rule = check["rule"]
    try:
        key: tuple[str, str] | None = (rule, json.dumps(value, sort_keys=True, separators=(",", ":")))
    except (TypeError, ValueError):  # not JSON (e.g. a YAML timestamp in a test document): not memoised
        key = None
    if key is not None:
        with _verdicts_lock:
            if key in _verdicts:
                _verdicts.move_to_end(key)
                return _verdicts[key]
    failure: str | None = None
    try:
        ok = _program(rule).evaluate({"self": celpy.json_to_cel(value)})
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


def _walk(schema: dict[str, Any], value: Any, path: str, out: list[str]) -> None:
    for check in schema.get("x-kubernetes-validations", []):
        failure = _evaluate(check, value)
        if failure is not None:
            out.append(f"{path or '<root>'}: {failure}")
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                _walk(sub, value[name], f"{path}.{name}" if path else name, out)
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{i}]", out)


def validate(obj: dict[str, Any]) -> list[str]:
    """All schema and CEL problems of one object after defaulting; empty when the API server would accept it."""
    return problems(apply_defaults(schema_for(obj["kind"]), copy.deepcopy(obj)))


def problems(defaulted: dict[str, Any]) -> list[str]:
    """:func:`validate` for an object whose defaults are already applied (it is not copied or changed)."""
    return schema_errors(defaulted) + cel_errors(defaulted)
