"""What a stateful wire keeps for one provider: the key that seals its opaque state, and the
conversations it stored for a later request to continue by id (Responses' previous_response_id,
Interactions' previous_interaction_id).

A stored conversation is the chain it continued followed by what it produced; its produced items
are also kept by their own id, for a request that names one (Responses' item_reference). The
`expire_handle` fault forgets everything stored at once, as an expired or deleted handle would.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from turnstate.local_provider.exchange import Exchange
from turnstate.local_provider.sealed import Sealer

Item = Mapping[str, object]


class ChainStore:
    """Stored conversations by id, and their produced items by id; safe to share between threads."""

    def __init__(self) -> None:
        self._chains: dict[str, tuple[Item, ...]] = {}
        self._items: dict[str, Item] = {}
        self._lock = threading.Lock()

    def keep(self, conversation_id: str, chain: Sequence[Item], produced: Sequence[Item]) -> None:
        """Keep a conversation: the chain it continued and what it `produced`, as one chain."""
        with self._lock:
            self._chains[conversation_id] = (*chain, *produced)
            for item in produced:
                if isinstance(item.get("id"), str):
                    self._items[str(item["id"])] = item

    def chain(self, conversation_id: str) -> tuple[Item, ...] | None:
        with self._lock:
            return self._chains.get(conversation_id)

    def item(self, item_id: str) -> Item | None:
        with self._lock:
            return self._items.get(item_id)

    def forget_all(self) -> None:
        with self._lock:
            self._chains.clear()
            self._items.clear()


@dataclass(frozen=True)
class StoredState:
    """One wire's state in one provider: its sealing key and its stored conversations."""

    sealer: Sealer = field(default_factory=Sealer)
    store: ChainStore = field(default_factory=ChainStore)


def stored_state(exchange: Exchange, name: str) -> StoredState:
    """The wire's state named `name`, made on its first request; `expire_handle` empties its store."""
    state = exchange.state.get(name, StoredState)
    if exchange.fault is not None and exchange.fault.kind == "expire_handle":
        state.store.forget_all()
    return state
