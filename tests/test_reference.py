"""The profile and sweep-file references in docs/ are generated from the pydantic models
(turnstate/reports/reference.py): every key has a description, the committed pages are what the models
give now, and an adapter's `request.options` are found through the registry, so adding one edits no
generator."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel, Field

from turnstate.adapters.chat_completions import ChatCompletionsAdapter
from turnstate.adapters.registry import ADAPTERS, AdapterDescriptor
from turnstate.adapters.tokens import MIN_CONTEXT_TOKENS
from turnstate.reports import reference
from turnstate.reports.reference import (
    GENERATED_END,
    GENERATED_START,
    PAGES,
    REGENERATE,
    main,
    page_problems,
    profile_reference,
    reference_table,
    spliced,
    undescribed_keys,
)
from turnstate.session.profile import Profile, profile_json_schema
from turnstate.session.profile_sections import AgentConfig

DOCS = Path(__file__).resolve().parent.parent / "docs"


class Leaf(BaseModel):
    named: int = Field(default=1, ge=1, description="described")
    bare: str = "x"


class Tiny(BaseModel):
    """A model with undescribed keys at the top, in a nested section and in a list's items."""

    top: bool = False
    section: Leaf = Field(default=Leaf(), description="a section")
    items: list[Leaf] = Field(default_factory=list, description="a list of sections")


class FakeAdapter(ChatCompletionsAdapter):
    options_model: ClassVar[type[BaseModel] | None] = Tiny


FAKE = AdapterDescriptor(
    adapter_id="fake.options.v1",
    provider="fake",
    api_surface="chat_completions",
    implementation=f"{__name__}:FakeAdapter",
    version="0.0.1",
    review_status="unreviewed",
    strategies=("manual_rolling",),
)


def test_every_key_of_a_profile_a_sweep_file_and_each_adapters_options_has_a_description():
    missing = {
        page: [key for prefix, model in spec.models() for key in undescribed_keys(model, prefix)]
        for page, spec in PAGES.items()
    }
    assert not any(missing.values()), f"keys without a description (give each Field a description=): {missing}"
    options_models = {descriptor.load().options_model for descriptor in ADAPTERS.values()} - {None}
    assert options_models <= {model for _, model in PAGES["profiles.md"].models()}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_committed_generated_reference_is_what_the_models_give_now(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    assert spliced(text, PAGES[page].render(), page) == text, f"docs/{page} is stale: run `{REGENERATE}`"


def test_an_undescribed_key_is_named_by_its_path_at_the_top_in_a_section_and_in_a_lists_items():
    assert undescribed_keys(Tiny) == ["top", "section.bare", "items[].bare"]
    assert undescribed_keys(Tiny, "request.options.")[0] == "request.options.top"


def test_a_stale_or_unmarked_page_is_named_with_the_command_that_regenerates_it():
    text = (DOCS / "sweeps.md").read_text(encoding="utf-8")
    stale = text.replace("| runs at once;", "| runs at one time;")
    assert page_problems("sweeps.md", text) == []
    assert page_problems("sweeps.md", stale) == [
        f"docs/sweeps.md: the generated reference differs from the models; fix: run `{REGENERATE}`"
    ]
    unmarked = text.replace(GENERATED_END, "")
    assert GENERATED_START in page_problems("sweeps.md", unmarked)[0]


def test_write_rewrites_a_stale_page_and_check_then_passes(tmp_path, capsys):
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    page = docs / "profiles.md"
    committed = page.read_text(encoding="utf-8")
    page.write_text(committed.replace("| the game the agent plays |", "| a game |"), encoding="utf-8")
    assert main(["--docs", str(docs), "--check"]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert main(["--docs", str(docs), "--write"]) == 0
    assert page.read_text(encoding="utf-8") == committed
    assert main(["--docs", str(docs), "--check"]) == 0


def test_an_adapter_added_to_the_registry_has_its_options_listed_under_its_id_and_checked(monkeypatch):
    monkeypatch.setattr(reference, "ADAPTERS", {**ADAPTERS, FAKE.adapter_id: FAKE})
    generated = profile_reference()
    assert f"### `request.options` of `{FAKE.adapter_id}`" in generated
    assert "| `request.options.items[].named` | int, ≥ 1 | `1` | described |" in generated
    assert "| `request.options.section.bare` | string | `x` |  |" in generated
    problems = page_problems("profiles.md", (DOCS / "profiles.md").read_text(encoding="utf-8"))
    undescribed = (
        "docs/profiles.md: request.options.items[].bare has no description; fix: give its Field a description="
    )
    assert undescribed in problems


def test_a_rows_type_shows_the_bounds_its_field_holds_and_a_required_key_says_so():
    row = next(
        line for line in reference_table(AgentConfig, "agent.").splitlines() if "`agent.max_context_length`" in line
    )
    assert f"| int, ≥ {MIN_CONTEXT_TOKENS}, ≤ 100000000 | required |" in row


def test_the_printed_json_schema_carries_each_keys_description():
    schema = profile_json_schema()
    max_actions = schema["$defs"]["AgentConfig"]["properties"]["max_actions"]
    assert max_actions["description"] == AgentConfig.model_fields["max_actions"].description
    assert schema["properties"]["id"]["description"] == Profile.model_fields["id"].description
