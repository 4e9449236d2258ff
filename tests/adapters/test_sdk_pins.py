"""The provider SDKs are pinned to the releases the suite runs against: the adapters' wire facts
(../shared/WIRE.md) and the local provider were checked against exactly those."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
SDKS = ("openai", "anthropic", "google-genai")


def pinned() -> dict[str, Requirement]:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    requirements = (Requirement(text) for text in dependencies)
    return {requirement.name: requirement for requirement in requirements if requirement.name in SDKS}


@pytest.mark.parametrize("sdk", SDKS)
def test_each_sdk_is_pinned_to_a_bounded_range_that_holds_the_installed_release(sdk):
    requirement = pinned()[sdk]
    operators = {spec.operator for spec in requirement.specifier}
    assert ">=" in operators and "<" in operators, f"{requirement}: a new release must not arrive untested"
    assert requirement.specifier.contains(version(sdk)), f"the suite runs {sdk} {version(sdk)}, outside {requirement}"
