"""What the emulated API server does to payloads: merge patches, selectors, and kubectl's Table format.

Pure functions, used by :mod:`tests.support.kube_emulator`.
"""

from __future__ import annotations

import copy
import datetime
import re
from typing import Any

from kmock._internal import rendering

__all__ = ["field_match", "json_path", "label_match", "merge_patch", "table", "wants_table"]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (strategic merge patches are approximated by it)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def label_match(labels: dict[str, str], selector: str) -> bool:
    for term in split_selector(selector):
        term = term.strip()
        if not term:
            continue
        if m := re.fullmatch(r"(\S+)\s+(in|notin)\s+\((.*)\)", term):
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if (op == "in") != (labels.get(key) in values):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term not in labels:
            return False
    return True


def split_selector(selector: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b`` is two terms)."""
    terms, depth, current = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    return [*terms, current]


def field_match(obj: dict[str, Any], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        negate = "!=" in term
        path, value = re.split(r"!=|==|=", term, maxsplit=1)
        actual: Any = obj
        for part in path.split("."):
            actual = actual.get(part) if isinstance(actual, dict) else None
        if (str(actual) == value) == negate:
            return False
    return True


def wants_table(request: rendering.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    then = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    seconds = max(0, int((datetime.datetime.now(tz=datetime.UTC) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def json_path(obj: Any, path: str) -> list[Any]:
    """The small JSONPath subset printer columns use: ``.a.b``, ``[0]``, ``[?(@.type=="Ready")]``."""
    values = [obj]
    for token in re.findall(r'\.(?:\\\.|[^.\[\\])+|\[\?\(@\.[^=]+=="[^"]*"\)\]|\[\d+\]', path):
        out: list[Any] = []
        for value in values:
            if token.startswith("[?"):
                key, wanted = re.match(r'\[\?\(@\.([^=]+)=="([^"]*)"\)\]', token).groups()  # type: ignore[union-attr]
                out += [v for v in (value if isinstance(value, list) else []) if isinstance(v, dict) and v.get(key) == wanted]
            elif token.startswith("["):
                index = int(token[1:-1])
                if isinstance(value, list) and index < len(value):
                    out.append(value[index])
            elif isinstance(value, dict) and token[1:].replace("\\.", ".") in value:  # `\.`: a dot in a key
                out.append(value[token[1:].replace("\\.", ".")])
        values = out
    return values


def table(columns: list[dict[str, Any]] | None, current_rv: str, objs: list[dict[str, Any]], rv: str | None) -> dict[str, Any]:
    """The ``meta.k8s.io/v1`` Table kubectl asks for: Name, the CRD's printer columns (or Age)."""
    columns = columns or [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}]
    definitions += [
        {"name": c["name"], "type": "string" if c["type"] == "date" else c["type"], "format": c.get("format", ""),
         "description": c.get("description", ""), "priority": c.get("priority", 0)}
        for c in columns
    ]
    rows = []
    for obj in objs:
        cells: list[Any] = [obj["metadata"]["name"]]
        for column in columns:
            found = json_path(obj, column["jsonPath"])
            if column["type"] == "date":
                cells.append(_age(found[0] if found else None))
            else:
                cells.append(",".join(str(v) for v in found) if len(found) > 1 else (found[0] if found else None))
        metadata = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
        rows.append({"cells": cells, "object": metadata})
    return {
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv or current_rv},
        "columnDefinitions": definitions, "rows": rows,
    }
