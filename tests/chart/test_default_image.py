"""One default image: the operator's built-in default runtime image is the chart's image.

Without the chart (e.g. ``gatehouse-operator`` run by hand) the operator falls back to its own default image;
with the chart it gets ``GATEHOUSE_RUNTIME_IMAGE`` rendered from values.yaml. Both must name the same image.
"""

from __future__ import annotations

from typing import Any

import yaml

from gatehouse_operator.settings import DEFAULT_IMAGE_REPOSITORY, DEFAULT_IMAGE_TAG, DEFAULT_RUNTIME_IMAGE
from tests.chart.conftest import CHART, Render, of_kind


def _yaml(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CHART / name).read_text())
    return data


def test_values_image_repository_is_the_operators_default() -> None:
    assert _yaml("values.yaml")["image"]["repository"] == DEFAULT_IMAGE_REPOSITORY


def test_chart_app_version_is_the_operators_default_tag() -> None:
    """values.yaml leaves ``image.tag`` empty, so the chart's tag is its appVersion."""
    values = _yaml("values.yaml")
    assert not values["image"]["tag"] and not values["runtime"]["image"]["tag"]
    assert _yaml("Chart.yaml")["appVersion"] == DEFAULT_IMAGE_TAG
    assert f"{DEFAULT_IMAGE_REPOSITORY}:{DEFAULT_IMAGE_TAG}" == DEFAULT_RUNTIME_IMAGE


def test_rendered_runtime_image_is_the_operators_default(render: Render) -> None:
    (deployment,) = of_kind(render(), "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GATEHOUSE_RUNTIME_IMAGE"] == DEFAULT_RUNTIME_IMAGE
