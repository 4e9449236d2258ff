"""Environments by registered id: the built-in ones in this package, others from installed packages.

Rules it keeps:
1. A profile names an environment by its id alone (letters, digits, `_` and `-`, starting with a
   letter). A name that looks like a file path, a module path or a URL is refused before anything is
   looked up, so nothing is ever loaded, downloaded or run from what a profile says.
2. The built-in ids are BUILTIN_ENVIRONMENTS. An installed distribution registers an environment
   through the entry-point group `turnstate.environments`: the entry point's name is the id, its
   value `module:factory`, the factory an EnvironmentFactory.
3. Listing the ids reads entry-point names from the installed metadata and imports nothing; a
   third-party module is imported only when `make_environment` is asked for its id.
4. A built-in id wins over an entry point of the same name, with a warning naming the entry point:
   refusing instead would let any installed package break every profile that names the built-in,
   and a profile that names a built-in always gets the game this package ships.
5. An id that two installed distributions register is refused: which one ran would depend on the
   order of sys.path. An entry point whose name is not an id is ignored with a warning.
6. Whatever a third-party module or factory raises while it is imported or built, and a result that
   lacks the protocol's calls, is an EnvironmentConfigError naming the id and its entry point: a
   profile error, never a traceback.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points

from turnstate.environments.arc_agi3 import ArcAgi3, missing_toolkit
from turnstate.environments.beacon_grid import BeaconGrid
from turnstate.environments.catalog_hunt import CatalogHunt
from turnstate.environments.protocol import Environment, EnvironmentConfigError, EnvironmentFactory

ENTRY_POINT_GROUP = "turnstate.environments"
BUILTIN_ENVIRONMENTS: dict[str, EnvironmentFactory] = {
    ArcAgi3.name: ArcAgi3.from_options,  # the ARC-AGI-3 toolkit (an extra) is imported only when one is built
    BeaconGrid.name: BeaconGrid.from_options,
    CatalogHunt.name: CatalogHunt.from_options,
}
# What a built-in environment needs beyond the base install, found without importing it (None: nothing).
BUILTIN_REQUIREMENTS: dict[str, Callable[[], str | None]] = {ArcAgi3.name: missing_toolkit}
ENVIRONMENT_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
PROTOCOL_CALLS = ("reset", "observe", "step", "receipts")
MAX_REASON_CHARS = 300  # a third party's error message, kept to one readable line


class EnvironmentWarning(UserWarning):
    """An installed entry point that is not used: shadowed by a built-in id, or not an id at all."""


def environment_ids() -> list[str]:
    """Every id a profile may name, sorted; reads installed metadata only, so it imports nothing."""
    return sorted({*BUILTIN_ENVIRONMENTS, *(entry.name for entry in _third_party())})


def unmet_requirement(name: str) -> str | None:
    """What this install lacks to play environment `name`, as an install instruction (None: nothing,
    or not known until a third-party environment is built)."""
    requirement = BUILTIN_REQUIREMENTS.get(name)
    return requirement() if requirement is not None else None


def make_environment(name: str, seed: int, options: Mapping[str, object] | None = None) -> Environment:
    """Build the environment registered as `name`; the same id, seed and options give the same game."""
    options = dict(options or {})
    builtin = BUILTIN_ENVIRONMENTS.get(name)
    if builtin is not None:
        _third_party()  # warns if an installed entry point tries to take the id
        return builtin(seed, options)
    entry = _registered_entry(name)
    where = f"environment {name!r} (entry point {entry.value!r})"
    try:
        factory = entry.load()
    except Exception as error:
        raise EnvironmentConfigError(
            f"{where} could not be imported: {_reason(error)}", "name", _package_fix(name)
        ) from None
    try:
        environment = factory(seed, options)
    except EnvironmentConfigError as error:
        raise EnvironmentConfigError(f"environment {name!r}: {error}", error.key, error.fix) from None
    except Exception as error:
        raise EnvironmentConfigError(
            f"{where} failed to build: {_reason(error)}",
            "options",
            "check environment.options against the package's documentation, or report it to its authors",
        ) from None
    missing = [call for call in PROTOCOL_CALLS if not callable(getattr(environment, call, None))]
    actions = getattr(environment, "actions", None)
    if not isinstance(actions, tuple) or not actions or not all(isinstance(action, str) for action in actions):
        missing.append("actions (a non-empty tuple of names)")
    if missing:
        raise EnvironmentConfigError(
            f"{where} built a {type(environment).__name__} that lacks the environment protocol's {', '.join(missing)}",
            "name",
            _package_fix(name),
        )
    return environment


def _registered_entry(name: str) -> EntryPoint:
    """The one installed entry point registered as `name`, after refusing a name that is no id."""
    if not ENVIRONMENT_ID.fullmatch(name):
        raise EnvironmentConfigError(
            f"{name!r} {_looks_like(name)}; a profile names an environment only by its registered id, "
            "and nothing is loaded from a path, a module or a URL",
            "name",
            f"use a registered id ({', '.join(environment_ids())}), and install a third-party environment's package",
        )
    entries = [entry for entry in _third_party() if entry.name == name]
    if not entries:
        raise EnvironmentConfigError(
            f"unknown environment {name!r}; registered environments: {', '.join(environment_ids())}",
            "name",
            f"use a registered id, or install the package that registers {name!r} "
            f"(entry-point group {ENTRY_POINT_GROUP})",
        )
    if len(entries) > 1:
        raise EnvironmentConfigError(
            f"environment {name!r} is registered by {len(entries)} installed packages "
            f"({', '.join(entry.value for entry in entries)}), so which one runs is not decided",
            "name",
            "uninstall all but one of them",
        )
    return entries[0]


def _third_party() -> list[EntryPoint]:
    """The installed entry points a profile may name, warning about those it never can."""
    usable = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in BUILTIN_ENVIRONMENTS:
            warnings.warn(
                f"the installed entry point {entry.name!r} ({entry.value}) in {ENTRY_POINT_GROUP} is ignored: "
                f"{entry.name!r} is a built-in environment, which always wins",
                EnvironmentWarning,
                stacklevel=3,
            )
        elif not ENVIRONMENT_ID.fullmatch(entry.name):
            warnings.warn(
                f"the installed entry point {entry.name!r} ({entry.value}) in {ENTRY_POINT_GROUP} is ignored: "
                "its name is not an environment id (letters, digits, _ and -, starting with a letter)",
                EnvironmentWarning,
                stacklevel=3,
            )
        else:
            usable.append(entry)
    return usable


def _looks_like(name: str) -> str:
    """What a name that is not an id looks like, so the refusal says why in the user's terms."""
    if "://" in name or name.lower().startswith(("http:", "https:", "file:", "www.")):
        return "looks like a URL"
    if "/" in name or "\\" in name or name.startswith("~") or name.endswith(".py"):
        return "looks like a file path"
    if "." in name or ":" in name:
        return "looks like a module path"
    return "is not an environment id (letters, digits, _ and -, starting with a letter, at most 64)"


def _reason(error: Exception) -> str:
    """A third party's exception as one bounded line: its type and message."""
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def _package_fix(name: str) -> str:
    return f"fix or reinstall the package that registers {name!r}, or name another environment"
