"""Golden files: compare what the code produces with a file under tests/testdata, or rewrite the file.

The switch is pytest's ``--update-golden`` option (the ``update_golden`` fixture in tests/conftest.py), e.g.
``.venv/bin/pytest tests/contract/test_translator_golden.py --update-golden``; review the diff before committing it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def render(actual: Any) -> str:
    """A golden file's text: a string as it is, anything else as indented JSON with sorted keys."""
    if isinstance(actual, str):
        return actual
    return json.dumps(actual, indent=2, sort_keys=True) + "\n"


def assert_golden(actual: Any, path: Path, update: bool = False) -> None:
    """``actual`` (a string, or JSON data compared as data) must match the golden file ``path``.

    With ``update`` the file is rewritten from ``actual``. A missing file is written and the test fails, so a new
    golden file is always reviewed before it counts.
    """
    if update or not path.exists():
        path.write_text(render(actual))
        if not update:
            pytest.fail(f"{path} did not exist; written now - review it and run again")
    expected: Any = path.read_text() if isinstance(actual, str) else json.loads(path.read_text())
    assert expected == actual, f"{path} differs; rerun with --update-golden and review the diff"


__all__ = ["assert_golden", "render"]
