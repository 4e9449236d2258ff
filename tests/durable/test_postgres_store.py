"""What only the PostgreSQL store has (turnstate/durable/checkpoints/postgres.py and stores.py), on a
real throwaway server: the lease and its fencing token across writers, a connection lost mid-run and
taken again, a database that is down, refuses the password, or is of a newer schema, and the rules
that say which store a run folder's checkpoints are in. What every store does is in
test_store_conformance.py."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.harness.test_checkpoints import META, checkpoint, empty_state, grown
from tests.harness.test_resume import invoke, journaled, long_default_profile
from turnstate.adapters.contract import Usage
from turnstate.durable.checkpoints import KEY_VARIABLE, CheckpointError, open_run_store, postgres
from turnstate.durable.checkpoints.postgres import PostgresCheckpointStore
from turnstate.durable.checkpoints.stores import STORE_VARIABLE
from turnstate.durable.layout import CHECKPOINT_FILE, CHECKPOINT_POINTER
from turnstate.session.profile import load_profile
from turnstate.session.runner import Runner, RunResult

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[postgres]')")


@pytest.fixture
def run_dir(tmp_path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    return folder


def terminate(url: str, store: PostgresCheckpointStore) -> None:
    """End `store`'s connection from the server's side, as a restart or a network's cut does."""
    assert store._connection is not None
    pid = store._connection.info.backend_pid
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def checkpoints_of(url: str, run: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as database:
        rows = database.execute("SELECT seq FROM turnstate_checkpoints WHERE run = %s ORDER BY seq", (run,))
        return [seq for (seq,) in rows]


def test_a_second_writer_is_refused_naming_the_holder(postgres_url):
    first = PostgresCheckpointStore(postgres_url, "held-run", META)
    try:
        with pytest.raises(CheckpointError, match=rf"open to write \(held by \S+ pid {os.getpid()}\)"):
            PostgresCheckpointStore(postgres_url, "held-run", META)
    finally:
        first.close()
    PostgresCheckpointStore(postgres_url, "held-run", META).close()  # the lock went with the connection


def test_a_lost_connection_is_taken_again_and_its_commit_written_once(postgres_url):
    state = grown(empty_state(), 1)
    with PostgresCheckpointStore(postgres_url, "cut-run", META) as store:
        store.commit(checkpoint(state, 1))
        terminate(postgres_url, store)
        state = grown(state, 2)
        assert store.commit(checkpoint(state, 2)) == 2
        assert store.latest().state == state
    assert checkpoints_of(postgres_url, "cut-run") == [1, 2]


def test_a_writer_whose_run_another_took_meanwhile_can_never_commit_again(postgres_url):
    """The fencing token: A's connection is cut, B resumes the run and commits, and A, reconnected,
    finds its token gone and is refused, naming B; the checkpoints are B's."""
    stale = PostgresCheckpointStore(postgres_url, "fenced-run", META)
    stale.commit(checkpoint(grown(empty_state(), 1), 1))
    terminate(postgres_url, stale)
    with PostgresCheckpointStore(postgres_url, "fenced-run", META) as taker:
        taker.latest()
        taker.commit(checkpoint(grown(empty_state(), 2), 2))
    with pytest.raises(CheckpointError, match="lost the run's lease .*another process resumed the run"):
        stale.commit(checkpoint(grown(empty_state(), 2), 2))
    stale.close()
    assert checkpoints_of(postgres_url, "fenced-run") == [1, 2]


def test_a_database_that_stays_away_fails_the_commit_with_nothing_written(postgres_url, monkeypatch):
    monkeypatch.setattr(postgres, "RECONNECT_SECONDS", 0.5)
    with PostgresCheckpointStore(postgres_url, "gone-run", META) as store:
        store.commit(checkpoint(grown(empty_state(), 1), 1))
        terminate(postgres_url, store)
        store.url = postgres_url.replace(str(urlsplit(postgres_url).port), "1")  # nobody listens there
        with pytest.raises(CheckpointError, match=r"checkpoint 2 was not written.*did not come back within 0 s"):
            store.commit(checkpoint(grown(empty_state(), 2), 2))
    assert checkpoints_of(postgres_url, "gone-run") == [1]


def test_a_wrong_password_or_a_server_that_is_down_is_named_without_the_password(postgres_url):
    wrong = postgres_url.replace(":throwaway-password-7c1e@", ":not-the-password@")
    with pytest.raises(CheckpointError, match="cannot connect to the checkpoint database") as refused:
        PostgresCheckpointStore(wrong, "any", META)
    assert "not-the-password" not in str(refused.value) and "password authentication failed" in str(refused.value)
    down = postgres_url.replace(str(urlsplit(postgres_url).port), "1")
    with pytest.raises(CheckpointError, match="cannot connect") as refused:
        PostgresCheckpointStore(down, "any", META)
    assert "throwaway-password" not in str(refused.value)


def test_a_database_of_a_newer_schema_is_refused_naming_both(postgres_url):
    PostgresCheckpointStore(postgres_url, "schema-run", META).close()
    with psycopg.connect(postgres_url, autocommit=True) as database:
        database.execute("UPDATE turnstate_schema SET version = 99")
    try:
        with pytest.raises(CheckpointError, match="has schema 99, and this turnstate reads schema 1; fix:"):
            PostgresCheckpointStore(postgres_url, "schema-run", META)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as database:
            database.execute("UPDATE turnstate_schema SET version = 1")


# -- which store a run's checkpoints are in (stores.py) -------------------------------------------


def test_a_new_run_keeps_its_checkpoints_where_the_setting_says_and_its_folder_points_there(
    postgres_url, run_dir, monkeypatch
):
    monkeypatch.setenv(STORE_VARIABLE, postgres_url)
    with open_run_store(run_dir, META) as store:
        store.commit(checkpoint(grown(empty_state(), 1), 1))
    pointer = json.loads((run_dir / CHECKPOINT_POINTER).read_text())
    assert pointer["url"] == postgres_url.replace(":throwaway-password-7c1e", "")  # never the password
    assert pointer["run"].startswith("run-") and not (run_dir / CHECKPOINT_FILE).exists()
    assert checkpoints_of(postgres_url, pointer["run"]) == [1]
    monkeypatch.delenv(STORE_VARIABLE)
    monkeypatch.setenv("PGPASSWORD", "throwaway-password-7c1e")  # the pointer's URL has none: libpq's own
    with open_run_store(run_dir) as reader:  # the folder says where, whatever the setting of the day
        assert reader.latest().sequence == 1


def test_a_setting_that_names_another_place_than_the_runs_own_is_refused_naming_both(
    postgres_url, run_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv(STORE_VARIABLE, postgres_url)
    open_run_store(run_dir, META).close()
    other = postgres_url.rsplit("/", 1)[0] + "/another_database"
    monkeypatch.setenv(STORE_VARIABLE, other)
    with pytest.raises(CheckpointError, match="this run's checkpoints are in postgresql://.*/postgres, and"):
        open_run_store(run_dir, META)
    kept_in_sqlite = tmp_path / "sqlite-run"
    kept_in_sqlite.mkdir(mode=0o700)
    monkeypatch.delenv(STORE_VARIABLE)
    open_run_store(kept_in_sqlite, META).close()
    monkeypatch.setenv(STORE_VARIABLE, postgres_url)
    with pytest.raises(CheckpointError, match=f"checkpoints are in {kept_in_sqlite / CHECKPOINT_FILE}, and"):
        open_run_store(kept_in_sqlite, META)
    monkeypatch.setenv(STORE_VARIABLE, "mysql://somewhere/db")
    with pytest.raises(CheckpointError, match="must be `sqlite` or a postgresql://"):
        open_run_store(tmp_path, META)


# -- a run on PostgreSQL, end to end ---------------------------------------------------------------


def test_a_run_on_postgresql_sigkilled_and_resumed_restores_its_sealed_continuation_and_ends_as_uninterrupted(
    postgres_url, tmp_path, monkeypatch
):
    monkeypatch.setenv(KEY_VARIABLE, "a key of the postgres tests, long enough")
    monkeypatch.setenv(STORE_VARIABLE, postgres_url)
    profile = long_default_profile(tmp_path, levels=6)
    baseline = Runner(load_profile(profile), tmp_path / "baseline").run()
    assert baseline.outcome == "win", baseline.failure
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "turnstate.cli", "run", str(profile), "--out", str(runs)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while process.poll() is None and len(list(runs.glob("*/step_*.json"))) < baseline.accepted_actions // 2:
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    (run_dir,) = runs.iterdir()
    assert not (run_dir / CHECKPOINT_FILE).exists()
    monkeypatch.delenv(STORE_VARIABLE)  # the run folder says where its checkpoints are
    monkeypatch.setenv("PGPASSWORD", "throwaway-password-7c1e")
    resumed = invoke("resume", str(run_dir), "--json")
    assert resumed.exit_code == 0, resumed.output
    meta = json.loads(resumed.stdout)
    (resume,) = meta["resumes"]
    assert resume["continuation"] == "restored" and resume["checkpoint"] >= 1
    assert (meta["outcome"], meta["accepted_actions"], meta["levels_won"]) == ("win", baseline.accepted_actions, 6)
    assert Usage.from_dict(meta["usage"]) == baseline.usage + Usage.from_dict(resume["lost_usage"])
    assert journaled(run_dir) == journaled(baseline.artifacts)
    run = json.loads((run_dir / CHECKPOINT_POINTER).read_text())["run"]
    assert checkpoints_of(postgres_url, run) == list(range(1, meta["accepted_actions"] + 1))


@pytest.mark.parametrize(
    ("fault", "why"),
    [("stop", "was not written"), ("freeze", "was not written: the database did not answer within 1 s")],
)
def test_a_database_lost_mid_run_fails_the_run_with_its_last_checkpoint_intact_and_a_resume_goes_on(
    tmp_path, monkeypatch, fault, why
):
    """The server stops mid-run (its own, for this test), or hangs (every process of it SIGSTOPped: it
    accepts connections and never answers), and stays away past the reconnect budget: `turnstate run`
    exits 1 saying why, the checkpoints hold every turn the run recorded, and once the server is back
    `turnstate resume` ends the game as the uninterrupted run does."""
    from tests.postgres_server import throwaway_server, unavailable

    if unavailable():
        pytest.skip(f"no PostgreSQL server: {unavailable()}")
    monkeypatch.setattr(postgres, "RECONNECT_SECONDS", 1.0)
    monkeypatch.setattr(postgres, "ANSWER_SECONDS", 1.0)
    monkeypatch.setattr(postgres, "CONNECT_SECONDS", 1)
    profile = long_default_profile(tmp_path, levels=4)
    baseline = Runner(load_profile(profile), tmp_path / "baseline").run()
    with throwaway_server() as server:
        monkeypatch.setenv(STORE_VARIABLE, server.url)
        runs = tmp_path / "runs"
        failed_mid_run(
            profile, runs, baseline.accepted_actions // 2, getattr(server, fault), why, "did not come back within 1 s"
        )
        server.start() if fault == "stop" else server.thaw()
        assert_kept_and_resumed(runs, server.url, baseline)


def failed_mid_run(profile: Path, runs: Path, steps: int, fault: Callable[[], None], *said: str) -> None:
    """`turnstate run` of `profile` into `runs`, `fault()` done once it recorded `steps` steps: the run
    exits 1 saying each of `said`, with no traceback and no password."""

    def fault_mid_run() -> None:
        while len(list(runs.glob("*/step_*.json"))) < steps:
            time.sleep(0.002)
        fault()

    faulting = threading.Thread(target=fault_mid_run, daemon=True)
    faulting.start()
    failed = invoke("run", str(profile), "--out", str(runs))
    faulting.join()
    assert failed.exit_code == 1, failed.output
    assert all(words in failed.output for words in said), failed.output
    assert "Traceback" not in failed.output and "throwaway-password" not in failed.output


def assert_kept_and_resumed(runs: Path, url: str, baseline: RunResult) -> None:
    """The failed run in `runs` kept every turn it recorded in the database at `url` but the one whose
    commit failed (its step record was on its way), and `turnstate resume` ends it as `baseline` did."""
    (run_dir,) = runs.iterdir()
    recorded = len(list(run_dir.glob("step_*.json")))
    run = json.loads((run_dir / CHECKPOINT_POINTER).read_text())["run"]
    assert checkpoints_of(url, run) in (list(range(1, recorded)), list(range(1, recorded + 1)))
    resumed = invoke("resume", str(run_dir), "--json")
    assert resumed.exit_code == 0, resumed.output
    meta = json.loads(resumed.stdout)
    assert (meta["outcome"], meta["accepted_actions"]) == ("win", baseline.accepted_actions)
    assert journaled(run_dir) == journaled(baseline.artifacts)


def test_first_opens_of_a_new_database_at_once_make_its_schema_once(postgres_url):
    """Eight stores open a database no store has opened: one makes the tables, the others wait for it
    and see them (each waiter's snapshot is taken after the schema's lock, not before)."""
    import concurrent.futures

    fresh = postgres_url.rsplit("/", 1)[0] + "/fresh_database"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS fresh_database")
        admin.execute("CREATE DATABASE fresh_database")

    def opened(number: int) -> int:
        with PostgresCheckpointStore(fresh, f"run-{number}", META) as store:
            return store.commit(checkpoint(grown(empty_state(), 1), 1))

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert list(pool.map(opened, range(8))) == [1] * 8
    with psycopg.connect(fresh, autocommit=True) as database:
        assert database.execute("SELECT version FROM turnstate_schema").fetchall() == [(1,)]


def test_checkpoints_option_and_a_sweeps_checkpoints_say_where_and_refuse_what_is_neither(
    postgres_url, tmp_path, monkeypatch
):
    monkeypatch.setenv(STORE_VARIABLE, "sqlite")  # restored after the test: --checkpoints sets it in this process
    refused = invoke("run", "--checkpoints", "mysql://db", "--out", str(tmp_path))
    assert refused.exit_code == 2 and "--checkpoints must be `sqlite` or a postgresql://" in refused.output
    assert "Traceback" not in refused.output
    ran = invoke("run", "--checkpoints", postgres_url, "--out", str(tmp_path / "runs"), "--json")
    assert ran.exit_code == 0, ran.output
    run_dir = Path(json.loads(ran.stdout)["run_folder"])
    run = json.loads((run_dir / CHECKPOINT_POINTER).read_text())["run"]
    assert checkpoints_of(postgres_url, run)[-1] == json.loads(ran.stdout)["turns"]
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("id: s\nprofiles: [local-manual-rolling]\ncheckpoints: sqlite3:///x\n")
    refused = invoke("sweep", str(sweep), "--out", str(tmp_path / "sweep"))
    assert refused.exit_code == 1 and f"{sweep}: checkpoints: it must be `sqlite` or a postgresql://" in refused.output
    refused = invoke("sweep", str(sweep), "--checkpoints", "nonsense", "--out", str(tmp_path / "sweep"))
    assert refused.exit_code == 1 and "--checkpoints: it must be `sqlite`" in refused.output


def test_a_damaged_record_is_named_by_the_stores_url_and_run(postgres_url, monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, "a key of the postgres tests, long enough")
    with PostgresCheckpointStore(postgres_url, "damaged-run", META) as store:
        store.commit(checkpoint(grown(empty_state(), 1), 1))
    with psycopg.connect(postgres_url, autocommit=True) as database:
        database.execute("UPDATE turnstate_continuation SET body = body || '\\x00'::bytea WHERE run = 'damaged-run'")
    with pytest.raises(CheckpointError) as damaged, PostgresCheckpointStore(postgres_url, "damaged-run") as reader:
        reader.latest()
    shown = postgres.shown(postgres_url)
    assert str(damaged.value).startswith(f"{shown} (run damaged-run): continuation record 1 fails authentication")


def test_turnstate_prune_reaches_the_database_a_run_folder_names_and_names_one_it_cannot_reach(
    postgres_url, tmp_path, monkeypatch
):
    """Two runs on PostgreSQL and one in SQLite, in one folder of runs: the old ones' checkpoints go,
    wherever they are, with their local provider's service; a database that went away is named."""
    runs, month_ago = tmp_path / "runs", 31 * 86400
    folders = {}
    for name, store in (("old", postgres_url), ("new", postgres_url), ("old-sqlite", None)):
        monkeypatch.setenv(STORE_VARIABLE, store or "sqlite")
        folders[name] = runs / name
        folders[name].mkdir(mode=0o700, parents=True)
        with open_run_store(folders[name], META) as store_of_run:
            store_of_run.commit(checkpoint(grown(empty_state(), 1), 1))
    old_run = json.loads((folders["old"] / CHECKPOINT_POINTER).read_text())["run"]
    with psycopg.connect(postgres_url, autocommit=True) as database:
        database.execute("UPDATE turnstate_checkpoints SET at = at - %s WHERE run = %s", (month_ago, old_run))
    old_file = folders["old-sqlite"] / CHECKPOINT_FILE
    os.utime(old_file, (time.time() - month_ago,) * 2)
    monkeypatch.delenv(STORE_VARIABLE)
    monkeypatch.setenv("PGPASSWORD", "throwaway-password-7c1e")  # the pointers' URLs have none
    pruned = invoke("prune", str(runs), "--older-than", "30d", "--json")
    assert pruned.exit_code == 0, pruned.output
    shown = postgres.shown(postgres_url)
    assert sorted(json.loads(pruned.output)["deleted"]) == sorted([f"{shown} run {old_run}", str(old_file)])
    assert checkpoints_of(postgres_url, old_run) == []
    new_run = json.loads((folders["new"] / CHECKPOINT_POINTER).read_text())["run"]
    assert checkpoints_of(postgres_url, new_run) == [1]
    gone = tmp_path / "gone"  # a run folder whose database is not there any more
    gone.mkdir(mode=0o700)
    port = urlsplit(postgres_url).port
    (gone / CHECKPOINT_POINTER).write_text(json.dumps({"url": shown.replace(f":{port}/", ":1/"), "run": "r"}))
    refused = invoke("prune", str(tmp_path), "--older-than", "30d")
    assert refused.exit_code == 1
    assert (
        "127.0.0.1:1/postgres" in refused.output
        and "the checkpoints of 1 run(s) there were not pruned" in refused.output
    )
    assert "throwaway-password" not in refused.output


def test_a_database_whose_disk_fills_mid_run_fails_the_run_naming_it_and_a_resume_goes_on_once_there_is_room(
    tmp_path, monkeypatch
):
    """The run's tables live on a small filesystem of their own (a tablespace on a tmpfs), which fills
    mid-run: the commit that finds no room fails the run, exit 1, saying so; every turn the run
    recorded before is kept; once there is room, `turnstate resume` ends the game as the
    uninterrupted run does."""
    from tests.postgres_server import throwaway_server, unavailable

    if unavailable():
        pytest.skip(f"no PostgreSQL server: {unavailable()}")
    disk = Path(tempfile.mkdtemp(prefix="turnstate-disk-"))  # outside the test's folder, which the server cannot reach
    disk.chmod(0o755)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.decode().strip()}")
    try:
        profile = long_default_profile(tmp_path, levels=20)
        baseline = Runner(load_profile(profile), tmp_path / "baseline").run()
        tablespace = disk / "tablespace"
        tablespace.mkdir()
        shutil.chown(tablespace, "postgres", "postgres")
        with throwaway_server() as server:
            with psycopg.connect(server.url, autocommit=True) as admin:
                admin.execute(f"CREATE TABLESPACE small LOCATION '{tablespace}'")
                admin.execute("ALTER DATABASE postgres SET default_tablespace = small")
            monkeypatch.setenv(STORE_VARIABLE, server.url)
            runs, filler = tmp_path / "runs", disk / "filler"

            def fill() -> None:
                with contextlib.suppress(OSError), filler.open("wb") as file:  # every free block, as a log would
                    while True:
                        file.write(b"\0" * 4096)
                        file.flush()

            steps = baseline.accepted_actions // 4
            failed_mid_run(profile, runs, steps, fill, "was not written", "No space left on device")
            filler.unlink()
            assert_kept_and_resumed(runs, server.url, baseline)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
        disk.rmdir()


class SeveringProxy:
    """A TCP relay to the server whose connections `sever` can cut as a network that drops packets
    does: nothing passes either way, and the server's side stays open (its session lives on, holding
    what it held) until `release` closes it, as the server's keepalive probes would find it gone."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream, self.severed, self.pairs = upstream, threading.Event(), []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            server = socket.create_connection(self.upstream)
            severed = threading.Event()
            self.pairs.append((server, severed))
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target, severed), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket, severed: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while (data := source.recv(65536)) and not severed.is_set():
                target.sendall(data)

    def sever(self) -> None:
        for _, severed in self.pairs:
            severed.set()

    def release(self) -> None:
        for server, severed in self.pairs:
            if severed.is_set():
                with contextlib.suppress(OSError):
                    server.shutdown(socket.SHUT_RDWR)  # a close alone waits for the pump blocked on it


def test_a_connection_cut_without_a_reset_is_taken_again_once_its_old_session_lets_the_run_go(
    postgres_url, monkeypatch
):
    """The network between writer and server goes silent: the commit's answer never comes, the
    writer gives up on the connection after ANSWER_SECONDS and connects again; the server's session
    of the old connection still holds the run's lock until it finds its client gone. Taking the run
    again waits for that (it was refused at once, naming this very process as the holder), and the
    commit is written once."""
    monkeypatch.setattr(postgres, "ANSWER_SECONDS", 1.0)
    monkeypatch.setattr(postgres, "RECONNECT_SECONDS", 15.0)
    parts = urlsplit(postgres_url)
    proxy = SeveringProxy((parts.hostname, parts.port))
    relayed = postgres_url.replace(f":{parts.port}/", f":{proxy.port}/")
    with PostgresCheckpointStore(relayed, "severed-run", META) as store:
        store.commit(checkpoint(grown(empty_state(), 1), 1))
        assert store._connection is not None
        shown = {name: store._connection.execute(f"SHOW {name}").fetchone()[0] for name in postgres.KEEPALIVES}
        assert shown == {name: str(value) for name, value in postgres.KEEPALIVES.items()}
        proxy.sever()
        threading.Timer(3.0, proxy.release).start()  # as the server's probes would, sooner
        started = time.monotonic()
        store.commit(checkpoint(grown(empty_state(), 2), 2))
        assert time.monotonic() - started > 3.0  # it waited for the old session, and did not fail at once
    assert checkpoints_of(postgres_url, "severed-run") == [1, 2]
