"""A test's seam on what a strategy built: an adapter class whose every request has its items
rewritten before the real adapter sends them (the adapter, its SDK and the server stay the real
ones), for a test that must change what reaches the wire (a prefill a small model needs, or state
a harness that lost it would drop)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from turnstate.adapters.contract import ModelRequest

Rewrite = Callable[[Any, tuple[Any, ...]], Sequence[Any]]  # (the adapter, the request's items) -> the items sent


def rewriting(adapter: type, rewrite: Rewrite) -> Any:
    """A subclass of the adapter class `adapter` that sends `rewrite(itself, items)` as each request's items."""

    class Rewriting(adapter):  # type: ignore[misc, valid-type]
        def call(self, request: ModelRequest) -> Any:
            return super().call(replace(request, items=tuple(rewrite(self, request.items))))

    return Rewriting
