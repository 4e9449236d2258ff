"""The checkpoint store: every accepted turn made durable, in the four layers of a checkpoint, kept apart.

The package: protocol.py (what a run knows of a store: CheckpointStore and the values it commits and
reads), records.py (what every store does alike over its backend's rows), codec.py (rules 3 and 11),
cipher.py (rule 6), lifted.py (rule 12), sqlite.py (the SQLite store: rules 2, 7-10), postgres.py (the
PostgreSQL store, with rules of its own), stores.py (which store holds a run's checkpoints), prune.py.
The rules below hold for every store; where they name SQLite's means, postgres.py says its own.

A run that dies must be able to go on from its last accepted turn. Restoring state is not replaying
history: a checkpoint keeps the facts apart from the representations of them (the seed's "checkpoint
layers"), and only the first three layers are needed to resume correctly; the fourth is an
optimization, never the sole basis of recovery.

Rules:
1. Layers. A checkpoint holds the durable facts (accepted actions, tool side effects and their
   receipts, user constraints: append-only JSON objects the caller gives and the store never
   interprets), the workflow cursor (one JSON object per checkpoint, written whole, so the caller keeps
   it small and puts what grows in the facts), the conversation projection and the model-specific
   continuation (the RuntimeState). Each is kept apart: the continuation in a table of its own, the
   cursor and the facts it added (a JSON array) in one row per checkpoint, so that a commit writes two
   rows, not one per record: each table a commit touches is another page written to the WAL. The
   projection (append-only normalized events) is the run's events.jsonl, stored once: a checkpoint
   keeps where it reaches in that log (the last event's number) and the SHA-256 of the log's bytes
   through it, so a resume reads the projection from the log and knows it for the one committed; a
   log cut or altered under a checkpoint is refused, never read as history (turnstate/durable/resume.py). A copy
   of the events in the store was the run folder's largest duplicate (224 KB of a 300-turn run's 1.5 MB).
2. One transaction per `commit`: a checkpoint is in the store whole or not at all. Everything a commit
   writes is encoded before the transaction begins, so a bad input raises with nothing written. A
   commit of one row (no continuation, no new meta: every commit of a keyless run) is one INSERT,
   which SQLite runs as a transaction of its own; BEGIN and COMMIT around it would cost the commit
   two more statements and a second take of the database's locks.
3. Continuation deltas. The RuntimeState is stored as a delta from the previous checkpoint's state
   when it extends that state (each list in its payload, `items` above all, keeps the old list as its
   prefix, and the turn spans likewise): the appended elements, and the payload values and envelope
   fields that changed, whole. It is a snapshot when it does not extend it (a trim, a compaction, a
   model switch rebuilt it), when there is no previous state in memory (the first commit after an
   open that did not call `latest`), and when the chain since the last snapshot holds more replaced
   bytes (values and fields written again whole) than the state it rebuilds (the snapshot plus what
   was appended since): then rebuilding reads at most about twice the state, and each snapshot is paid
   for by at least as many bytes of deltas before it, so the bytes stay linear in the run.
   Why not a snapshot every N checkpoints: a state that only grows (a wide window, no compaction) is
   O(turns) bytes, so snapshots every N turns would write O(turns^2 / N) bytes, the square this store
   exists to avoid; a chain of appends is already as cheap to rebuild as a snapshot of its end state.
   In a real run the snapshots come from trims and compactions, at the window's size.
4. `latest()` rebuilds the newest checkpoint exactly: the RuntimeState equal to the one committed, and
   its JSON identical; all facts, in order; the cursor; the projection's mark. A record that cannot be read (not
   JSON, a chain that does not start at a snapshot, a continuation that fails authentication) is a
   CheckpointError naming the file, never a traceback and never a silently fresh state.
5. Meta. A store records its CheckpointMeta (the RuntimeState's schema version, the adapter id and
   version, the strategy and the profile's digest) when it is created. A writer opening an existing
   store passes its own meta, and every difference refuses the open, named ("adapter_id: was
   openai.responses.v1, now anthropic.messages.v1"), unless the caller accepts that field (`accept`,
   the seam a model switch uses): the new meta is then recorded with the next commit, which is a
   snapshot (the new adapter's state does not extend the old one's). The store's own table layout is
   SQLite's `user_version`, and its `application_id` tells a checkpoint store from any other database.
6. Encryption at rest, of the continuation layer (the provider's opaque state: encrypted reasoning,
   signatures, compaction items), by default, so that a resume is exact by default: without the
   continuation a resume rebuilds the state from the projection, and a reasoning model forgets what
   only its sealed reasoning held (a keyless continuous_conversation run SIGKILLed after 30 steps and
   resumed lost a 12-level game it wins uninterrupted in 86 actions). The key (`chosen_key`):
   TURNSTATE_CHECKPOINT_KEY when it is set (a cluster sets the same value on every host, so a run
   resumes wherever it is retried); else the user's key file, KEY_FILE in the state folder
   (turnstate/durable/state_home.py, beside the local provider's services), 32 random bytes made owner-only on
   first use; `TURNSTATE_CHECKPOINT_KEY=off` opts out (the continuation is not kept). Key format: any
   string of at least MIN_KEY_CHARS characters, used as its UTF-8 bytes (generate one with
   `python -c "import secrets; print(secrets.token_urlsafe(32))"`); scrypt (n=2^15, r=8, p=1, about
   0.2 s per open) with a random per-database salt derives the AES-256-GCM key from a key given, so a
   passphrase is slow to guess and the same variable gives every store its own key; the key file's
   random bytes need no stretching, so HKDF-SHA256 with the salt derives it (microseconds a run). Each record has a fresh random
   96-bit nonce, and its associated data binds it to its store, its checkpoint and its kind, so a
   record moved to another row fails as a tampered one. A check record written at creation tells a
   wrong key at open. An encrypted store opened without the key, or with another, and a plain store
   opened to write with the variable set (its user expects encryption), are CheckpointErrors saying
   what to do; a plain store opened with the key file's key is resumed plain (it was started keyless
   or opted out). The facts, the cursor and
   the projection are plain, like the run's artifacts, under the same owner-only permissions.
7. Permissions. The database is created owner-only (0600) with O_CREAT | O_EXCL before SQLite opens
   it, so there is no moment it is readable by others; SQLite gives its -wal and -shm files the
   database's mode. The folder must be owned by the user and owner-only (0700), checked at every
   open: in a folder others may write, they could plant a -wal file that SQLite would replay into the
   store. An existing database must be a regular file, owned by the user, with no group or other bits.
8. Durability: WAL with synchronous=NORMAL. A commit has reached the WAL file in the operating
   system's cache when `commit` returns, so it survives a kill of the process at any point; a power
   loss or an operating system crash may lose the commits since the last WAL checkpoint (SQLite syncs
   at each one, every 1000 pages by default, a few hundred commits) but never corrupts the store or
   leaves half a commit: the store comes back at an earlier checkpoint, and a side effect performed
   after a lost commit has lost its intent too. Where that matters (real money, real mail),
   `synchronous="FULL"` syncs every commit (bench/checkpoints.py measures what it costs).
9. One writer. A store opened to write (with a meta) holds an exclusive advisory lock on its database
   until `close`: a second run or resume of the same run is refused rather than allowed to interleave
   its turns. A store opened to read (no meta) takes no lock and cannot commit.
10. A damaged store is set aside, never repaired in place: `set_aside` moves it (with its -wal and
   -shm) to a name that says so, under its writer's lock, and a new store made for the same run
   (`numbered_after`, what a resume from the run's records passes) numbers its first checkpoint
   after the ones the run's event log records, so the log's checkpoint events stay in order.
11. Compression. Each record of the cursor, the facts and the continuation is stored as raw DEFLATE
   with the plain bytes of the record before it in its layer as the preset dictionary (a snapshot
   stands alone), and sealed after that (ciphertext does not compress): what a turn repeats of the
   last (the cursor's names and most of its counts, a frame that changed in a few cells) costs a few
   bytes. `latest()` reads every cursor and facts record (about 50 bytes each) and the continuation
   from its snapshot, in order, so each record's dictionary is at hand. A writer that did not call
   it packs its first records alone, as it snapshots the state: a record packed with no dictionary
   inflates the same with any. At 1000 turns of a growing history, the store's three layers
   went from 1038 KB to 125 KB. A record that does not inflate is damage (DamagedStore).
12. Each image once (lifted.py). A continuation record holds a reference (the image's number in
   the store) where the state held a PNG's base64 in a provider's shape of it, and the store keeps
   the PNG's bytes once, with their SHA-256, written in the commit that first shows it: a snapshot
   names the window's frames instead of holding them all again. An image the store lacks, or whose
   bytes are not its digest's, is damage. The images are plain, like input_images/
   (durable/images.py): they are what the environment drew, not the provider's opaque state.
   Measured on a 300-turn image run of small frames (200-byte PNGs): the images once cost what
   their base64 inline did, since rule 11's deflate against the previous record takes most of a
   small frame's repetition; a frame larger than that 32 KiB window, or a snapshot's (which stands
   alone), is where storing it once pays.
13. Migrations. A store's layout version says how its tables and records are written; this
   turnstate reads each layout from the oldest its migrations start at. A writer's open migrates an
   older store, one transaction per step, changing the tables and never rewriting a record: each
   record says how it was written (a continuation record whether its images are lifted). A reader
   reads an older store as it is and changes nothing. A store of a newer layout than this turnstate
   knows is refused, naming both.

`prune(runs_dir, older_than)` deletes the stores of the runs whose last checkpoint is older than that:
the run folders in `runs_dir`, and those a sweep's folder holds further down (PRUNE_DEPTH);
`prune_runs` does so wherever each run keeps them, its rows in PostgreSQL too.
"""

from turnstate.durable.checkpoints.cipher import (
    KEY_FILE,
    KEY_VARIABLE,
    MIN_KEY_CHARS,
    OPT_OUT,
    ChosenKey,
    chosen_key,
    key_file,
)
from turnstate.durable.checkpoints.codec import apply_delta, continuation_delta, snapshot_of
from turnstate.durable.checkpoints.protocol import (
    SWITCHABLE,
    Checkpoint,
    CheckpointError,
    CheckpointMeta,
    CheckpointStore,
    DamagedStore,
    ProjectionMark,
    RestoredCheckpoint,
)
from turnstate.durable.checkpoints.prune import PRUNE_DEPTH, prune
from turnstate.durable.checkpoints.sqlite import APPLICATION_ID, LAYOUT_VERSION, SQLiteCheckpointStore, set_aside
from turnstate.durable.checkpoints.stores import Pruned, open_run_store, prune_runs, set_aside_run_store

__all__ = [
    "APPLICATION_ID",
    "KEY_FILE",
    "KEY_VARIABLE",
    "LAYOUT_VERSION",
    "MIN_KEY_CHARS",
    "OPT_OUT",
    "PRUNE_DEPTH",
    "SWITCHABLE",
    "Checkpoint",
    "CheckpointError",
    "CheckpointMeta",
    "CheckpointStore",
    "ChosenKey",
    "DamagedStore",
    "ProjectionMark",
    "RestoredCheckpoint",
    "SQLiteCheckpointStore",
    "apply_delta",
    "chosen_key",
    "continuation_delta",
    "key_file",
    "open_run_store",
    "prune",
    "prune_runs",
    "Pruned",
    "set_aside",
    "set_aside_run_store",
    "snapshot_of",
]
