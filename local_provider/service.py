"""The local provider's service state: what a real provider's account keeps for its clients.

A real provider's server-side state outlives any one client process: OpenAI opens an organization's
encrypted reasoning and serves a stored response long after it was made, Anthropic verifies its own
signatures whenever they come back. So the local provider keeps the same state in a `Service`:

- one master key, from which each wire derives its own sealing key (`key(name)`): the key of its
  encrypted reasoning, signatures, thought signatures and item ids (sealed.py);
- per wire that stores conversations, its `ChainStore`: the conversations stored for a later request
  to continue by id (Responses' previous_response_id, Interactions' previous_interaction_id);
- per wire that asks, its `ReplyLog`: a digest of each reply its model wrote, by which the model
  tells its own turns from a history another model wrote (messages_conversation.py).

Without a folder the service lives in memory, with a random master key: a new provider instance is a
new service, and what the old one issued fails as another account's does. With a folder
(`LocalProvider(service_dir=...)`) the service survives its provider: a new instance opened on the same
folder opens the old one's blobs and continues its stored conversations, as a run resumed after a kill
needs. The folder's rules:

1. Layout. `service.key` (the 32-byte master key), `lock`, one `<wire>.jsonl` per wire that has
   stored a conversation and one `<wire>.replies` (JSON lines too, {"reply": digest}) per wire that
   keeps a ReplyLog. The folder is created owner-only (0700) and each file 0600 (O_CREAT with
   O_EXCL or O_NOFOLLOW, so no file is ever readable by others); an existing folder or file others may
   read or write is refused, naming the chmod that fixes it.
2. One provider at a time. A provider holds an exclusive flock on `lock` from `open` to `close`; a
   second one opened meanwhile is refused (ServiceStateError), never left to interleave its writes.
   The kernel releases the lock of a killed process, so the run resumed after a kill opens it.
3. Bytes linear in the conversation. A stored conversation is written as one line: {"id", "continued"
   (the stored conversation its chain began with, or null), "dropped" (how many leading items of
   that chain and the new input it left out, as `truncation: auto` does), "added" (the request's own
   items), "produced" (what it produced)}, so a conversation continued N times costs N lines of its
   new items, never N copies of its whole chain. Lines are appended and each is written whole with
   one write; the chains are rebuilt from them when the folder is opened. A last line cut short by a
   kill is dropped (and cut from the file, so the next line starts clean); any other line that is not
   one this module wrote is a ServiceStateError naming the file and line.
4. Forgetting. The `expire_handle` fault's `forget_all` empties the store and its file.

Kept in memory even with a folder, as a real provider keeps them for minutes only: the prompt caches
(a resumed run's first request may report fewer cached tokens), and the request ordinals that faults
are scheduled by, which belong to one provider instance.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import os
import secrets
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from turnstate.adapters.private_files import private_problem
from turnstate.local_provider.sealed import KEY_BYTES

Item = Mapping[str, object]

KEY_FILE, LOCK_FILE, JOURNAL_SUFFIX, REPLIES_SUFFIX = "service.key", "lock", ".jsonl", ".replies"
FOLDER_MODE, FILE_MODE = 0o700, 0o600
_OWNER_ONLY_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


class ServiceStateError(RuntimeError):
    """The service folder cannot be used; the message names the file and what to do."""


class Service:
    """One provider account's keys and stored conversations, in memory or in `directory`.

    `open` before use and `close` after (LocalProvider does both in start and stop). Opening a folder
    reads it whole, so a bad file is an error at once, never a failed request later."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = None if directory is None else Path(directory)
        self._master: bytes | None = None
        self._stores: dict[str, ChainStore] = {}
        self._replies: dict[str, ReplyLog] = {}
        self._lock_descriptor: int | None = None
        self._guard = threading.Lock()

    def open(self) -> None:
        """Take the folder (rule 2) and read its key and stores; a service in memory keeps its own."""
        if self.directory is None:
            if self._master is None:
                self._master = secrets.token_bytes(KEY_BYTES)
            return
        folder = self.directory
        _owner_only_folder(folder)
        self._lock_descriptor = _locked(folder / LOCK_FILE)
        try:
            self._master = _master_key(folder / KEY_FILE)
            self._stores = {
                path.name[: -len(JOURNAL_SUFFIX)]: ChainStore(Journal(path))
                for path in sorted(folder.glob("*" + JOURNAL_SUFFIX))
            }
            self._replies = {
                path.name[: -len(REPLIES_SUFFIX)]: ReplyLog(Journal(path))
                for path in sorted(folder.glob("*" + REPLIES_SUFFIX))
            }
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the folder; a service in memory keeps its state for the next `open`."""
        if self.directory is None:
            return
        for store in self._stores.values():
            store.close()
        for replies in self._replies.values():
            replies.close()
        self._stores, self._replies = {}, {}
        if self._lock_descriptor is not None:
            os.close(self._lock_descriptor)  # closing the descriptor releases its flock
            self._lock_descriptor = None

    def key(self, name: str) -> bytes:
        """The sealing key of the wire `name`: its own, so one wire's blob never opens on another."""
        if self._master is None:
            raise RuntimeError("the service is not open")
        return hmac.new(self._master, b"turnstate-local-provider/wire/" + name.encode("utf-8"), hashlib.sha256).digest()

    def store(self, name: str) -> ChainStore:
        """The stored conversations of the wire `name`."""
        with self._guard:
            if name not in self._stores:
                journal = None if self.directory is None else Journal(self.directory / (name + JOURNAL_SUFFIX))
                self._stores[name] = ChainStore(journal)
            return self._stores[name]

    def replies(self, name: str) -> ReplyLog:
        """The log of the replies the wire `name`'s model wrote."""
        with self._guard:
            if name not in self._replies:
                journal = None if self.directory is None else Journal(self.directory / (name + REPLIES_SUFFIX))
                self._replies[name] = ReplyLog(journal)
            return self._replies[name]


class ReplyLog:
    """The digests of the replies a wire's model wrote, in memory as in its journal (one line each);
    safe to share between threads."""

    def __init__(self, journal: Journal | None = None) -> None:
        self._digests: set[str] = set()
        self._journal = journal
        self._lock = threading.Lock()
        if journal is not None:
            for line, record in journal.records():
                reply = record.get("reply")
                if not isinstance(reply, str):
                    raise journal.error(line, "its 'reply' is not a string")
                self._digests.add(reply)

    def add(self, reply: str) -> None:
        with self._lock:
            if reply in self._digests:
                return
            if self._journal is not None:
                self._journal.append({"reply": reply})
            self._digests.add(reply)

    def __contains__(self, reply: object) -> bool:
        with self._lock:
            return reply in self._digests

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()


@dataclass(frozen=True)
class _Stored:
    """One stored conversation as rule 3 writes it: its chain is `continued`'s chain and `added`,
    less the first `dropped` items, then `produced`."""

    continued: str | None
    dropped: int
    added: tuple[Item, ...]
    produced: tuple[Item, ...]
    length: int  # of its whole chain, for the next line's `dropped` to be checked against


class ChainStore:
    """Stored conversations by id, and their produced items by id; safe to share between threads.

    Each conversation is kept as the items it added to the one it continued (rule 3), in memory as in
    its journal; `chain` rebuilds the whole chain by walking back to its first conversation, and the
    latest one kept is also held whole, since the next request usually continues it."""

    def __init__(self, journal: Journal | None = None) -> None:
        self._stored: dict[str, _Stored] = {}
        self._items: dict[str, Item] = {}
        self._latest: tuple[str, tuple[Item, ...]] | None = None
        self._journal = journal
        self._lock = threading.Lock()
        if journal is not None:
            for line, record in journal.records():
                self._add(*_read_record(journal, line, record, self._stored))

    def keep(
        self, conversation_id: str, continued: str | None, chain: Sequence[Item], produced: Sequence[Item]
    ) -> None:
        """Keep a conversation: `chain`, what the request read (the chain of the stored conversation
        `continued`, perhaps without its oldest items, then its own), followed by what it `produced`.

        Only what `chain` adds to `continued`'s chain is kept: the request's chain begins with the very
        items `chain(continued)` gave it, found where its first item stands there and checked by
        equality. A chain that does not continue it is kept whole (right, only bigger); so is one whose
        `continued` was forgotten meanwhile."""
        chain, produced = tuple(chain), tuple(produced)
        with self._lock:
            before = self._chain(continued) if continued is not None else None
            if before is None:
                continued, before = None, ()
            first = chain[0] if chain else None
            dropped = next((index for index, item in enumerate(before) if item is first), len(before))
            shared = len(before) - dropped
            if before[dropped:] != chain[:shared]:
                continued, dropped, shared = None, 0, 0
            stored = _Stored(continued, dropped, chain[shared:], produced, len(chain) + len(produced))
            if self._journal is not None:
                self._journal.append(_record(conversation_id, stored))
            self._add(conversation_id, stored)
            self._latest = (conversation_id, (*chain, *produced))

    def chain(self, conversation_id: str) -> tuple[Item, ...] | None:
        with self._lock:
            return self._chain(conversation_id)

    def item(self, item_id: str) -> Item | None:
        with self._lock:
            return self._items.get(item_id)

    def forget_all(self) -> None:
        with self._lock:
            self._stored.clear()
            self._items.clear()
            self._latest = None
            if self._journal is not None:
                self._journal.clear()

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()

    def _add(self, conversation_id: str, stored: _Stored) -> None:
        self._stored[conversation_id] = stored
        for item in stored.produced:
            if isinstance(item.get("id"), str):
                self._items[str(item["id"])] = item

    def _chain(self, conversation_id: str) -> tuple[Item, ...] | None:
        if self._latest is not None and self._latest[0] == conversation_id:
            return self._latest[1]
        if conversation_id not in self._stored:
            return None
        path: list[_Stored] = []
        current: str | None = conversation_id
        while current is not None:
            path.append(self._stored[current])
            current = path[-1].continued
        items: list[Item] = []
        start = 0
        for stored in reversed(path):
            items.extend(stored.added)
            start += stored.dropped
            items.extend(stored.produced)
        return tuple(items[start:])


def _record(conversation_id: str, stored: _Stored) -> dict[str, object]:
    return {
        "id": conversation_id,
        "continued": stored.continued,
        "dropped": stored.dropped,
        "added": stored.added,
        "produced": stored.produced,
    }


def _read_record(
    journal: Journal, line: int, record: Mapping[str, object], known: Mapping[str, _Stored]
) -> tuple[str, _Stored]:
    """One journal line as (its id, its stored conversation), or the ServiceStateError naming what is wrong."""
    conversation_id, continued, dropped = record.get("id"), record.get("continued"), record.get("dropped")
    added, produced = record.get("added"), record.get("produced")
    if not isinstance(conversation_id, str):
        raise journal.error(line, "its id is not a string")
    if continued is not None and (not isinstance(continued, str) or continued not in known):
        raise journal.error(line, f"it continues {continued!r}, which no line before it stores")
    for name, items in (("added", added), ("produced", produced)):
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise journal.error(line, f"its {name!r} is not a list of objects")
    assert isinstance(added, list) and isinstance(produced, list)
    before = 0 if continued is None else known[continued].length
    if isinstance(dropped, bool) or not isinstance(dropped, int) or not 0 <= dropped <= before + len(added):
        raise journal.error(line, f"its 'dropped' is not a count of at most {before + len(added)} items")
    length = before + len(added) - dropped + len(produced)
    return conversation_id, _Stored(continued, dropped, tuple(added), tuple(produced), length)


class Journal:
    """An append-only file of JSON objects, one a line (rule 3), created 0600 at its first line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._descriptor: int | None = None
        self._closed = False

    def records(self) -> list[tuple[int, dict[str, object]]]:
        """Every whole line as (its number, its object); a last line cut short is dropped and cut off."""
        try:
            _check_file(self.path, os.lstat(self.path))
        except FileNotFoundError:
            return []
        data = self.path.read_bytes()
        whole = data.rfind(b"\n") + 1
        if whole < len(data):
            os.truncate(self.path, whole)  # a kill mid-write: the next line must not be glued to it
        records = []
        for number, text in enumerate(data[:whole].splitlines(), start=1):
            try:
                record = orjson.loads(text)
            except orjson.JSONDecodeError:
                record = None
            if not isinstance(record, dict):
                raise self.error(number, "it is not a JSON object")
            records.append((number, record))
        return records

    def append(self, record: Mapping[str, object]) -> None:
        """Write `record` as one line, with one write: a kill leaves it whole or cut short, never mixed."""
        if self._closed:
            raise ServiceStateError(
                f"{self.path}: the service was closed (its provider stopped) before this was stored"
            )
        if self._descriptor is None:
            self._descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _OWNER_ONLY_FLAGS, FILE_MODE)
        data = memoryview(orjson.dumps(record) + b"\n")
        while data:
            data = data[os.write(self._descriptor, data) :]

    def clear(self) -> None:
        self._check_open()
        if self._descriptor is not None:
            os.ftruncate(self._descriptor, 0)
        elif self.path.exists():
            os.truncate(self.path, 0)

    def close(self) -> None:
        """Write no more: the folder's lock is released with it, and another provider may open it."""
        self._closed = True
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None

    def _check_open(self) -> None:
        if self._closed:
            raise ServiceStateError(
                f"{self.path}: the service was closed (its provider stopped); nothing more is written"
            )

    def error(self, line: int, problem: str) -> ServiceStateError:
        return ServiceStateError(
            f"{self.path}: line {line}: {problem}; this is not a journal the local provider "
            "wrote (nothing in a service folder is meant to be edited); fix: restore it, or delete it to forget "
            "what it stored"
        )


def _owner_only_folder(folder: Path) -> None:
    """The folder, created owner-only if missing; an existing one must be the user's and owner-only."""
    try:
        info = os.stat(folder)
    except FileNotFoundError:
        try:
            folder.mkdir(mode=FOLDER_MODE, parents=True)
            os.chmod(folder, FOLDER_MODE)  # mkdir's mode passes through the umask
        except OSError as error:
            raise ServiceStateError(f"{folder}: cannot create the service folder: {error.strerror}") from None
        return
    problem = private_problem(folder, info, folder=True)
    if problem is not None:  # it holds the provider's keys
        raise ServiceStateError(f"{folder}: the service folder {problem}")


def _check_file(path: Path, info: os.stat_result) -> None:
    problem = private_problem(path, info, folder=False)
    if problem is not None:
        raise ServiceStateError(f"{path}: a service file {problem}")


def _locked(path: Path) -> int:
    """A descriptor of `path` holding its exclusive flock (rule 2), or the ServiceStateError saying who has it."""
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | _OWNER_ONLY_FLAGS, FILE_MODE)
    except OSError as error:
        raise ServiceStateError(f"{path}: cannot open the service's lock file: {error.strerror}") from None
    try:
        _check_file(path, os.fstat(descriptor))
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise ServiceStateError(
            f"{path.parent}: another local provider has this service open (a run on it, or the run being "
            "resumed, is still going); stop it first, or give this provider another service_dir"
        ) from None
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _master_key(path: Path) -> bytes:
    """The service's master key, made at the first open: written whole to a temporary file, then renamed,
    so a kill never leaves a key cut short."""
    try:
        _check_file(path, os.lstat(path))
    except FileNotFoundError:
        temporary = path.with_name(path.name + ".new")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _OWNER_ONLY_FLAGS, FILE_MODE)
        try:
            os.write(descriptor, secrets.token_bytes(KEY_BYTES))
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise ServiceStateError(
            f"{path}: the service key is {len(key)} bytes, not {KEY_BYTES}; this is not a key the local provider "
            "wrote; fix: restore it (without it nothing the service issued can be opened)"
        )
    return key
