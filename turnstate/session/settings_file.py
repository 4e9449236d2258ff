"""Reading a settings file (a profile, a sweep file) as strictly as the profile reference says: at most
MAX_PROFILE_BYTES of UTF-8, YAML held to JSON's types (no tags, anchors past a bound, or numbers past 64
bits), validated by a pydantic model, and every problem named as `file: key.path: problem; fix: ...`
(ProfileError), never as pydantic's many-line dump."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

MAX_PROFILE_BYTES = 64 * 1024
"""A profile is a page of settings (the shipped ones are under 2 kB); the bound keeps reading and parsing
any file named by mistake (a log, /dev/zero) well under a second."""


_Settings = TypeVar("_Settings", bound=BaseModel)


class ProfileError(ValueError):
    """Every problem of one profile file, each as `file: key.path: problem; fix: ...`."""

    def __init__(self, source: str, problems: list[tuple[str, str, str]]) -> None:
        self.source = source
        self.problems = problems
        lines = [f"{source}: {path or '(top level)'}: {problem}; fix: {fix}" for path, problem, fix in problems]
        super().__init__("\n".join(lines))


Override = tuple[str, str]  # a dotted key and its value as YAML text: `--set agent.max_actions=50`


def parse_override(given: str) -> Override:
    """`KEY=VALUE` as an Override; ValueError saying how to write one."""
    key, equals, value = given.partition("=")
    if not equals or not key.strip() or any(not part for part in key.strip().split(".")):
        raise ValueError(f"{given!r} is not KEY=VALUE; write a profile key's dotted path, such as agent.max_actions=50")
    return key.strip(), value


def load_settings(path: str | Path, model: type[_Settings], overrides: Sequence[Override] = ()) -> _Settings:
    """A YAML settings file (a profile, a sweep) read with the profile's rules and validated as `model`,
    each of `overrides` set in it first (a value is read as YAML is: `50` a number, `true` a bool)."""
    path = Path(path)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_PROFILE_BYTES + 1)  # no more: the path may be a log, or /dev/zero
    except OSError as error:
        raise ProfileError(str(path), [("", f"cannot read the file ({error.strerror})", "check the path")]) from None
    if len(raw) > MAX_PROFILE_BYTES:
        problem = f"the file is larger than {MAX_PROFILE_BYTES // 1024} KiB, far more than any profile"
        raise ProfileError(str(path), [("", problem, "check the path: a profile is a page of settings")])
    return parse_settings(_decode(raw, str(path)), str(path), model, overrides)


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _decode(raw: bytes, source: str) -> str:
    if raw.startswith(_UTF16_BOMS):
        raise ProfileError(
            source, [("", "the file is UTF-16 (it starts with a UTF-16 byte order mark)", _SAVE_AS_UTF8)]
        )
    if b"\x00" in raw:  # valid UTF-8, but YAML allows no NUL: UTF-16 without its mark, or not text
        offset = raw.index(b"\x00")
        problem = (
            f"not UTF-8 text: a NUL byte at offset {offset} (UTF-16 without a byte order mark, or not a text file)"
        )
        raise ProfileError(source, [("", problem, _SAVE_AS_UTF8)])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        byte = raw[error.start]
        line = raw.count(b"\n", 0, error.start) + 1
        problem = f"not UTF-8 text: byte 0x{byte:02x} at offset {error.start} (line {line})"
        raise ProfileError(source, [("", problem, _SAVE_AS_UTF8)]) from None


_SAVE_AS_UTF8 = "save the file as UTF-8"


# The kinds of settings file, by the model that reads each: what it is, the key only it has, and the
# command that takes it; a file of one kind given to the other's command is named as what it is.
FILE_KINDS = {
    "Profile": ("a profile", "runtime", "turnstate run"),
    "Sweep": ("a sweep file", "profiles", "turnstate sweep"),
}


def parse_settings(text: str, source: str, model: type[_Settings], overrides: Sequence[Override] = ()) -> _Settings:
    try:
        data = yaml.load(text, Loader=_ProfileLoader)  # a SafeLoader: builds plain data only
    except _Refused as error:
        raise ProfileError(source, error.problems) from None
    except yaml.YAMLError as error:
        raise ProfileError(
            source, [("", f"not valid YAML at {_where(error, text)}", "fix the YAML syntax there")]
        ) from None
    if not isinstance(data, dict):
        raise ProfileError(source, [("", "the profile must be a mapping of keys", "start with `id: ...`")])
    for kind, (what, marker, command) in FILE_KINDS.items():
        own_marker = FILE_KINDS.get(model.__name__, ("", "", ""))[1]
        if kind != model.__name__ and marker in data and own_marker not in data:
            raise ProfileError(
                source, [("", f"this is {what} (it has `{marker}:`)", f"run it with `{command} {source}`")]
            )
    if overrides:
        _override(data, overrides, source)
        source += " with " + " ".join(f"--set {key}={value}" for key, value in overrides)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ProfileError(source, validation_problems(error, model)) from None


def _override(data: dict[str, Any], overrides: Sequence[Override], source: str) -> None:
    """Each override's value set at its key in `data` (the mappings on its way made if missing)."""
    for key, text in overrides:
        where = f"--set {key}"
        try:
            value = yaml.load(text, Loader=_ProfileLoader) if text.strip() else ""
        except (_Refused, yaml.YAMLError):
            raise ProfileError(source, [(key, f"{where}: {text!r} is not a YAML value", "quote it")]) from None
        *parents, last = key.split(".")
        mapping = data
        for depth, part in enumerate(parents):
            inner = mapping.setdefault(part, {})
            if not isinstance(inner, dict):
                above = ".".join(parents[: depth + 1])
                raise ProfileError(source, [(key, f"{where}: {above} is not a mapping of keys", f"set {above} itself")])
            mapping = inner
        mapping[last] = value


def validation_problems(error: ValidationError, model: type[BaseModel]) -> list[tuple[str, str, str]]:
    """pydantic's errors as ProfileError's (key path, problem, fix), one per problem: the one
    translation of a ValidationError of any settings file (its str is a many-line dump). A list given
    enough items but left short by those that failed is not a problem of its own: pydantic reports it
    too ("at least 1 item after validation, not 0"), beside the items, which are named already."""
    items = error.errors()
    problems = [_explain(item, model) for item in items if not _short_by_failed_items(item)]
    return problems or [_explain(item, model) for item in items]


def _short_by_failed_items(item: Any) -> bool:
    given, context = item.get("input"), item.get("ctx") or {}
    return item["type"] == "too_short" and isinstance(given, (list, tuple)) and len(given) >= context["min_length"]


def _where(error: yaml.YAMLError, text: str) -> str:
    mark = getattr(error, "problem_mark", None)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}"
    if isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow
        return f"line {text.count(chr(10), 0, error.position) + 1} (character #x{error.character:04x} is not allowed)"
    return "unknown position"


# Numbers with an exponent, as YAML 1.2 reads them. YAML 1.1, which PyYAML follows, wants a dot and
# a signed exponent (1.0e+12), so `1e12` would be the text "1e12", and strict types would then
# reject every timeout written that way.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


_YAML_TAG = "tag:yaml.org,2002:"


_MERGE_TAG = f"{_YAML_TAG}merge"


# The YAML types a profile takes, by node kind: what JSON holds, so every artifact that records a
# setting is JSON. A timestamp, binary, set or ordered map is named instead of reaching a model.
_JSON_TAGS: dict[type[yaml.Node], frozenset[str]] = {
    yaml.ScalarNode: frozenset(f"{_YAML_TAG}{name}" for name in ("str", "int", "float", "bool", "null")),
    yaml.MappingNode: frozenset({f"{_YAML_TAG}map"}),
    yaml.SequenceNode: frozenset({f"{_YAML_TAG}seq"}),
}


_READ_AS = {"int": "a whole number", "float": "a number", "bool": "true or false"}


MAX_NESTING = 64  # levels of mappings and lists; a profile's settings are a few levels deep


MAX_NUMBER_CHARS = 1000  # longer number text is refused unread (Python reads 4300 digits at most)


INT_LIMIT = 2**63  # whole numbers fit in 64 bits, so any arithmetic or record of them stays exact


class _Refused(yaml.YAMLError):
    """What the loader refuses, as (key path, problem, fix) for ProfileError."""

    def __init__(self, problems: list[tuple[str, str, str]]) -> None:
        super().__init__(problems)
        self.problems = problems


class _ProfileLoader(yaml.SafeLoader):
    """SafeLoader for profiles, bounded in time and memory whatever the file holds:

    - no aliases (`*name`): no profile needs one, and aliases are how a 1 kB file expands to 10^9
      values (the "billion laughs"), or refers to itself;
    - at most MAX_NESTING levels, since composing a node recurses once per level;
    - every value of a JSON type (_JSON_TAGS), numbers readable and in range, before any is built,
      so a 5000-digit whole number, `.inf` or `!!int abc` is named with its key path;
    - a key given twice in one mapping is an error (PyYAML would keep the last one silently, so
      the first section would not apply);
    - `1e12` is a number, as in YAML 1.2.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str] = []  # the key path of the node being composed
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """PyYAML passes a mapping value's key node, or a list item's index, as `index` (None for a
        key or the document)."""
        steps = [str(index)] if isinstance(index, int) else [_key_name(index)] if isinstance(index, yaml.Node) else []
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            problem = f"the alias *{event.anchor} (line {line}): a profile takes no YAML aliases"
            raise _Refused([(".".join([*self._path, *steps]), problem, "write the value out in full where it is used")])
        if self._depth >= MAX_NESTING:  # a key counts too: it may be a mapping
            raise self._too_deep(line)
        self._path += steps
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            del self._path[len(self._path) - len(steps) :]

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        """The scanner keeps a possible key for each open `[` or `{` and looks them all over for every
        token, so flow nesting is bounded here, ahead of the composer: 5000 `[` would take seconds."""
        if self.flow_level >= MAX_NESTING:
            raise self._too_deep(self.get_mark().line + 1)
        super().fetch_flow_collection_start(TokenClass)

    def _too_deep(self, line: int) -> _Refused:
        problem = f"nested more than {MAX_NESTING} levels deep (line {line})"
        fix = "flatten it: a profile's settings are a few levels deep"
        return _Refused([(".".join(self._path[:4]) + "...", problem, fix)])

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        problems = list(_node_problems(self, node, ()))
        if problems:
            raise _Refused(problems)
        return self.construct_document(node)


_ProfileLoader.add_implicit_resolver(f"{_YAML_TAG}float", _EXPONENT_FLOAT, list("-+.0123456789"))


def _key_name(key: yaml.Node) -> str:
    return str(key.value) if isinstance(key, yaml.ScalarNode) else key.tag


def _node_problems(loader: yaml.SafeLoader, node: yaml.Node, path: tuple[str, ...]) -> Iterator[tuple[str, str, str]]:
    """(key path, problem, fix) for every value construction would crash on, lose or make
    non-JSON, and every key repeated in one mapping. Linear: the loader refused every alias."""
    where = ".".join(path)
    if node.tag not in _JSON_TAGS[type(node)]:
        shown = node.tag.removeprefix(_YAML_TAG)
        problem = f"a value of YAML type {shown} (line {node.start_mark.line + 1})"
        yield where, problem, "write text, a number, true or false, a list or a mapping, without a tag"
    elif isinstance(node, yaml.ScalarNode):
        found = _scalar_problem(loader, node)
        if found is not None:
            yield where, *found
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _node_problems(loader, item, (*path, str(index)))
    else:
        first_line: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            name = _key_name(key)
            if key.tag != _MERGE_TAG:
                yield from _node_problems(loader, key, path)
                if isinstance(key, yaml.ScalarNode) and (key.tag, name) in first_line:
                    lines = f"line {first_line[key.tag, name] + 1} and line {key.start_mark.line + 1}"
                    yield ".".join((*path, name)), f"given twice ({lines})", "keep one of them"
                first_line.setdefault((key.tag, name), key.start_mark.line)
            yield from _node_problems(loader, value, (*path, name))


def _scalar_problem(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> tuple[str, str] | None:
    """Why a number or boolean cannot be a setting: unreadable, out of range, or not finite (JSON
    has no .inf or .nan, so an artifact that recorded one would not be JSON)."""
    kind = node.tag.removeprefix(_YAML_TAG)
    if kind not in _READ_AS:
        return None
    text = node.value if len(node.value) <= 40 else f"{node.value[:20]}... ({len(node.value)} characters)"
    if len(node.value) > MAX_NUMBER_CHARS:
        return f"{text} is too long to be {_READ_AS[kind]}", "use a shorter value"
    try:
        value = loader.yaml_constructors[node.tag](loader, node)
    except (ValueError, KeyError):
        return f"{text!r} cannot be read as {_READ_AS[kind]}", "correct the value, or remove its tag"
    if kind == "int" and not -INT_LIMIT <= value < INT_LIMIT:
        return f"{text} is out of range (whole numbers here fit in 64 bits)", "use a smaller number"
    if kind == "float" and not math.isfinite(value):
        return f"{text} is not a finite number", "use a finite number"
    return None


def _explain(item: Any, model: type[BaseModel]) -> tuple[str, str, str]:
    context = item.get("ctx") or {}
    contradiction = context.get("error")
    if isinstance(contradiction, Contradiction):
        return contradiction.path, contradiction.problem, contradiction.fix
    location = tuple(item["loc"])
    path = ".".join(str(part) for part in location)
    kind = item["type"]
    if kind == "extra_forbidden":
        keys = _allowed_keys(location[:-1], model)
        close = difflib.get_close_matches(str(location[-1]), keys, n=1)
        guess = f"did you mean `{close[0]}`? " if close else ""
        return path, "unknown key", f"{guess}remove it or correct the spelling (allowed here: {', '.join(keys)})"
    if kind == "missing":
        return path, "required key is missing", "add it"
    got = item.get("input")
    return path, f"{item['msg']} (got {got!r})", _FIXES.get(kind, "see the profile reference in docs/profiles.md")


_FIXES = {
    "finite_number": "use a finite number",
    "less_than": "lower the value",
    "tuple_type": "use a list",
    "list_type": "use a list",
    "int_parsing": "use a whole number",
    "int_type": "use a whole number",
    "int_from_float": "use a whole number",
    "float_parsing": "use a number",
    "float_type": "use a number",
    "bool_parsing": "use true or false",
    "bool_type": "use true or false",
    "string_type": "use a text value",
    "literal_error": "use one of the listed values",
    "greater_than_equal": "raise the value",
    "greater_than": "raise the value",
    "less_than_equal": "lower the value",
    "model_type": "use a mapping of keys",
    "dict_type": "use a mapping of keys",
    "string_pattern_mismatch": "use letters, digits, '.', '_' or '-', starting with a letter or digit",
    "string_too_short": "give a non-empty value",
}


def _allowed_keys(location: tuple[Any, ...], settings: type[BaseModel]) -> list[str]:
    model: Any = settings
    for part in location:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[part].annotation
        model = next(
            (
                arg
                for arg in (getattr(annotation, "__args__", None) or (annotation,))
                if isinstance(arg, type) and issubclass(arg, BaseModel)
            ),
            annotation,
        )
    return sorted(model.model_fields)


class Contradiction(ValueError):
    """Settings that contradict each other, raised by a model's validator: pydantic reports it under
    the model's location, and `_explain` names it by its own key path (`path`) with its fix."""

    def __init__(self, path: str, problem: str, fix: str) -> None:
        super().__init__(f"{problem}")
        self.path, self.problem, self.fix = path, problem, fix
