"""The store of offloaded tool results, and the `read_tool_result` tool that pages them back.

A request whose stale tool results were replaced by pointers (strategies/offload.py) must lose
nothing: each replaced text is put here under its ref before the request goes, and the model reads it
back, a page at a time, by calling `read_tool_result` with the ref its pointer names.

Rules:
1. A ref is a name of the form REF_PATTERN and nothing else, never a path: the store refuses any other
   before it touches a file, so no argument can reach outside `<folder>/tool_results/`.
2. A ref's text is written once (writer.write_once): a temporary file in the same folder, fsynced, then renamed to
   `<ref>.txt`; an existing file is never rewritten (its ref is its content's digest, so it already
   holds the text). A store without a folder keeps the texts in memory, for a run without artifacts.
3. A page is up to PAGE_CHARS characters from `offset`, then one last line saying where it ends and
   how to read on, or that the result ends there.
4. Every call the store cannot answer (an unknown ref, an offset past the end, an argument the tool
   does not take) raises ToolRefused with the reason, which the model reads as an error result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from turnstate.adapters.contract import ToolCall, ToolResult, ToolSpec
from turnstate.durable.layout import TOOL_RESULTS
from turnstate.durable.writer import write_once
from turnstate.environments.protocol import ToolRefused
from turnstate.strategies.offload import READ_TOOL_RESULT, REF_PATTERN, ref_of

PAGE_CHARS = 4000

READ_TOOL_RESULT_SPEC = ToolSpec(
    READ_TOOL_RESULT,
    "Read an earlier tool result that was offloaded to save context: give the ref its placeholder names, "
    "and an offset to read on from where a page ended.",
    {
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "The ref the offloaded result's placeholder names."},
            "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "The character to start at."},
        },
        "required": ["ref"],
        "additionalProperties": False,
    },
)

_REF = re.compile(REF_PATTERN)
_ARGUMENTS = frozenset(READ_TOOL_RESULT_SPEC.parameters["properties"])


class ToolResultStore:
    """Offloaded tool results by ref: files under `<folder>/tool_results/`, or memory when `folder` is
    None. `put` is called for every offloaded result of every request, so it remembers the refs it has
    written and answers again at the cost of a set lookup."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = None if folder is None else Path(folder) / TOOL_RESULTS
        self._texts: dict[str, str] = {}  # memory only: the texts themselves
        self._written: set[str] = set()

    def put(self, ref: str, text: str) -> None:
        """Keep `text` under `ref`, once. Raises ValueError for a ref that is not a ref, or not `text`'s."""
        if ref in self._written:
            return
        if not isinstance(ref, str) or not _REF.fullmatch(ref):
            raise ValueError(f"not a tool result ref: {ref!r}")
        if ref != ref_of(text):
            raise ValueError(f"ref {ref} is not the digest of the text put under it")
        if self.folder is None:
            self._texts[ref] = text
        else:
            write_once(self.folder / f"{ref}.txt", text.encode("utf-8"))
        self._written.add(ref)

    def answer(self, call: ToolCall) -> ToolResult:
        """The result of a `read_tool_result` call: the page it asks for, or an error result saying why not."""
        try:
            return ToolResult(call.id, call.name, self.read(call.arguments))
        except ToolRefused as refused:
            return ToolResult(call.id, call.name, str(refused), is_error=True)

    def read(self, arguments: Mapping[str, object]) -> str:
        """One `read_tool_result` call's answer: the page its arguments ask for (rule 3)."""
        ref, offset = _checked(arguments)
        text = self._text(ref)
        if offset > len(text):
            raise ToolRefused(f"offset {offset} is past the end of {ref}, which has {len(text)} characters")
        end = min(offset + PAGE_CHARS, len(text))
        last = (
            "[end of result]"
            if end == len(text)
            else f"[characters {offset}-{end} of {len(text)}; read on with offset {end}]"
        )
        return f"{text[offset:end]}\n{last}"

    def _text(self, ref: str) -> str:
        if self.folder is None:
            if ref in self._texts:
                return self._texts[ref]
        else:
            try:
                return (self.folder / f"{ref}.txt").read_bytes().decode("utf-8")
            except FileNotFoundError:
                pass
        raise ToolRefused(f"no offloaded tool result has the ref {ref!r}; use the ref a placeholder names")


def _checked(arguments: Mapping[str, object]) -> tuple[str, int]:
    """The call's ref and offset, or ToolRefused naming what is wrong with them."""
    extra = sorted(str(name) for name in arguments if name not in _ARGUMENTS)
    if extra:
        raise ToolRefused(f"{READ_TOOL_RESULT} takes only ref and offset, not {', '.join(extra)}")
    ref = arguments.get("ref")
    if not isinstance(ref, str):
        raise ToolRefused(f"{READ_TOOL_RESULT} needs ref, the string a placeholder names")
    if not _REF.fullmatch(ref):
        raise ToolRefused(f"{ref!r} is not a tool result ref (they look like tr- and 16 hex digits)")
    offset = arguments.get("offset", 0)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ToolRefused(f"offset must be a whole number of at least 0, not {offset!r}")
    return ref, offset
