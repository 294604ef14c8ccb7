"""Validate custom resources offline the way the API server would: structural defaults, the CRD's
``openAPIV3Schema`` (jsonschema) and its CEL ``x-kubernetes-validations`` (cel-python).

Used by the CRD tests and available to the emulated API server, which has no validation of its own.
"""

from __future__ import annotations

import copy
import functools
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


def schema_errors(obj: dict[str, Any]) -> list[str]:
    schema = schema_for(obj["kind"])
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
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


def _walk(schema: dict[str, Any], value: Any, path: str, out: list[str]) -> None:
    for check in schema.get("x-kubernetes-validations", []):
        try:
            ok = _program(check["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        except Exception as exc:  # a rule that cannot evaluate rejects the object, as in the API server
            ok = False
            check = {**check, "message": f"{check.get('message', check['rule'])} ({exc})"}
        if not bool(ok):
            out.append(f"{path or '<root>'}: {check.get('message', check['rule'])}")
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                _walk(sub, value[name], f"{path}.{name}" if path else name, out)
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{i}]", out)


def validate(obj: dict[str, Any]) -> list[str]:
    """All schema and CEL problems of one object after defaulting; empty when the API server would accept it."""
    defaulted = apply_defaults(schema_for(obj["kind"]), copy.deepcopy(obj))
    return schema_errors(defaulted) + cel_errors(defaulted)
