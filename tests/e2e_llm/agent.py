"""The example Agent with a ModelConfig for the local model: the manifests a user writes for any OpenAI-compatible
server (the tests and ``bench --real-model`` run the runtime on them)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.e2e_llm.llama import ALIAS
from tests.support.runtime import write_manifests

MODEL_CONFIG = "local-qwen"


def agent_manifests(directory: Path, tools_url: str, base_url: str, **approval: object) -> list[Path]:
    """``examples/file-manager`` with its RemoteMCPServer at ``tools_url`` and this ModelConfig: provider OpenAI,
    the served model's name, the server's base URL, no API key (the local server checks none)."""
    files = write_manifests(directory, tools_url, **approval)
    model = {
        "apiVersion": "gatehouse.dev/v1alpha1", "kind": "ModelConfig",
        "metadata": {"name": MODEL_CONFIG, "namespace": "default"},
        "spec": {"provider": "OpenAI", "model": ALIAS, "baseUrl": base_url},
    }
    (directory / "modelconfig.yaml").write_text(yaml.safe_dump(model))
    agent_file = directory / "agent.yaml"
    agent = yaml.safe_load(agent_file.read_text())
    agent["spec"]["modelConfig"] = MODEL_CONFIG
    agent_file.write_text(yaml.safe_dump(agent))
    return files
