"""Every file, folder and module the docs and the README name exists, so the docs cannot drift from the tree.

A name counts when it is written in backticks or as a link target: a path with a known suffix or a trailing slash
(``agent_runtime/server/gate.py``, ``tests/cluster/``), or a dotted module (``agent_runtime.contract.wire``).
Paths may be written from the repository root or from inside a package (``server/gate.py``, ``kube.py`` of the
operator); a bare module file (``gate.py``) must exist somewhere in the tree. Other bare file names (``config.json``)
are what a program writes, and generated places (``.venv/``, ``.cache/``) and URL paths (``/ui/``) are not files of the
tree: neither is checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
# where a path may be written from: the root, and the folders whose files docs name by their short path
BASES = [ROOT, ROOT / "agent_runtime", ROOT / "agent_runtime" / "contract", ROOT / "agent_runtime" / "clients",
         ROOT / "tests" / "testdata", ROOT / "operator", ROOT / "operator" / "gatehouse_operator", ROOT / "tests",
         ROOT / "docs", ROOT / "charts" / "gatehouse", ROOT / "hack", ROOT / "bench"]
SUFFIXES = (".py", ".md", ".yaml", ".toml", ".json", ".js", ".html", ".sh", ".go", ".mod", ".db")
TICKED = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
# named in the docs as paths of other projects
EXTERNAL = {"docs/architecture/human-in-the-loop.md"}  # kagent-dev/kagent's description of its hitl/v1 extension
TRACKED = {p.name for p in ROOT.rglob("*.py") if ".venv" not in p.parts and ".cache" not in p.parts}
MODULE = re.compile(r"^(agent_runtime|gatehouse_operator)(\.[a-z_][a-z0-9_]*)+$")


def _path_like(token: str) -> bool:
    if token.startswith(("/", ".", "http", "~", "$", "<")) or any(c in token for c in "*{<:+") or token in EXTERNAL:
        return False
    if "/" not in token:
        return token.endswith(".py")
    return token.endswith(SUFFIXES) or (token.endswith("/") and "/" in token[:-1] + "/" and token.count("/") >= 1)


def named(text: str) -> set[str]:
    tokens = {m.group(1) for m in TICKED.finditer(text)} | {m.group(1) for m in LINK.finditer(text)}
    return {t.rstrip(".,:;") for t in tokens if _path_like(t.rstrip(".,:;")) or MODULE.match(t)}


def exists(token: str, doc: Path) -> bool:
    if MODULE.match(token):
        parts = token.split(".")
        base = ROOT / "operator" if parts[0] == "gatehouse_operator" else ROOT
        p = base.joinpath(*parts)
        if p.with_suffix(".py").is_file() or (p / "__init__.py").is_file():
            return True
        # or a name defined in a module (its last part)
        parent = base.joinpath(*parts[:-1])
        source = parent.with_suffix(".py") if parent.with_suffix(".py").is_file() else parent / "__init__.py"
        return source.is_file() and re.search(rf"^\s*(def|class|async def)? *{parts[-1]}\b", source.read_text(), re.M) is not None
    if "/" not in token:
        return token in TRACKED
    return any((base / token).exists() for base in [doc.parent, *BASES])


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    missing = sorted(t for t in named(doc.read_text()) if not exists(t, doc))
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_a_moved_module_is_caught() -> None:
    text = "see `agent_runtime/server/gate.py`, `agent_runtime/wire.py`, `agent_runtime.run_scope`, `crds/`, `gone.py`"
    assert sorted(t for t in named(text) if not exists(t, ROOT / "README.md")) == [
        "agent_runtime.run_scope", "agent_runtime/wire.py", "gone.py"]
