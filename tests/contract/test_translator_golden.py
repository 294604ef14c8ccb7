"""Golden-file tests of the translator: tests/testdata/translator/<case>/{input.yaml,expected.json}.

``expected.json`` is either the AgentConfig or ``{"errors": [{"path", "message"}]}``; ``crd.json`` holds
what the CRDs' schemas and CEL rules say about each input document. The first Agent in ``input.yaml`` is
translated; when there are more, they are its namespace (``translate(..., agents=...)``, the first included), as
the operator passes them; with one Agent alone the namespace is unknown (``agents=None``), as for ``serve -f``. Regenerate with
``pytest tests/contract/test_translator_golden.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_runtime.contract.errors import TranslationError
from agent_runtime.contract.manifests import load_manifests
from agent_runtime.contract.translator import translate
from tests.support.crd_validation import validate
from tests.support.golden import assert_golden

CASES = Path(__file__).parents[1] / "testdata" / "translator"


def _cases() -> list[str]:
    return sorted(p.name for p in CASES.iterdir() if (p / "input.yaml").exists())


def _translate(case: Path) -> dict[str, Any]:
    try:
        manifests = load_manifests([case / "input.yaml"])
        agent = next(iter(manifests.agents.values()))
        agents = manifests.agents if len(manifests.agents) > 1 else None
        return json.loads(translate(agent, manifests.model_configs, manifests.mcp_servers, agents=agents).to_json())
    except TranslationError as exc:
        return {"errors": [{"path": p.path, "message": p.message} for p in exc.problems]}


def _crd_verdicts(case: Path) -> dict[str, list[str]]:
    docs = [d for d in yaml.safe_load_all((case / "input.yaml").read_text()) if d]
    return {f"{d['kind']}/{d['metadata']['name']}": validate(d) for d in docs}


@pytest.mark.parametrize("name", _cases())
def test_translation_matches_golden(name: str, update_golden: bool) -> None:
    case = CASES / name
    assert_golden(_translate(case), case / "expected.json", update_golden)


@pytest.mark.parametrize("name", _cases())
def test_crd_verdicts_match_golden(name: str, update_golden: bool) -> None:
    case = CASES / name
    assert_golden(_crd_verdicts(case), case / "crd.json", update_golden)


def test_there_are_cases() -> None:
    assert len(_cases()) >= 6
