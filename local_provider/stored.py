"""What a stateful wire keeps for one provider: the key that seals its opaque state, and the
conversations it stored for a later request to continue by id (Responses' previous_response_id,
Interactions' previous_interaction_id).

Both come from the provider's service (service.py): in memory, or in a service folder that outlives
the provider instance, as a real provider's account does. A stored conversation is the chain it
continued followed by what it produced; its produced items are also kept by their own id, for a
request that names one (Responses' item_reference). The `expire_handle` fault forgets everything
stored at once (in the folder too), as an expired or deleted handle would.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from turnstate.local_provider.exchange import Exchange
from turnstate.local_provider.sealed import Sealer
from turnstate.local_provider.service import ChainStore as ChainStore
from turnstate.local_provider.service import Service


@dataclass(frozen=True)
class StoredState:
    """One wire's state in one provider: its sealing key and its stored conversations."""

    sealer: Sealer
    store: ChainStore

    @classmethod
    def of(cls, service: Service, name: str) -> StoredState:
        return cls(Sealer(service.key(name)), service.store(name))


def stored_state(exchange: Exchange, name: str) -> StoredState:
    """The wire's state named `name`, made on its first request; `expire_handle` empties its store."""
    state = exchange.state.get(name, partial(StoredState.of, exchange.state.service, name))
    if exchange.fault is not None and exchange.fault.kind == "expire_handle":
        state.store.forget_all()
    return state
