"""Imported last by the sweep pool's server process (engines.preloaded_modules): it leaves what
the server holds, turnstate and the SDKs imported, out of garbage collection for good.

Each run's process is forked from that server. Python's documentation advises exactly this before a
fork (gc.freeze): a collection in a child would otherwise walk every object the server holds, and
writing their collection headers copies each page it touches, so two runs at once would spend their
first fraction of a second copying the server's memory and compete for the memory bus doing it."""

import gc

gc.collect()
gc.freeze()
