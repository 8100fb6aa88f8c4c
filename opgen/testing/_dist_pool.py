"""A pool of gloo processes on 127.0.0.1 that every distributed test of a pytest session shares.

Starting a process group costs seconds (spawning, importing torch and the
operators), so the ranks are started once, on first use, and each test sends
them a payload: an importable function and picklable arguments, run on every
rank as `fn(mesh, *args, **kwargs)` with a 1-D CPU DeviceMesh. The ranks
import the modules the pool is given (the project's package) while they start,
so that this happens while the other tests run. The pytest process only
coordinates: it hosts the rendezvous store on a port the OS picks (no race for
a free port), waits for every rank with a deadline, and reports an error on
any rank at once. A rank that died or did not answer, or an error some rank did
not share, closes the pool (no rank stays blocked in a collective) and the next
payload starts a fresh one; the report shows where each silent rank was stuck
(its Python stack). A payload whose every error is a collective timing out
(a rank stalled past COLLECTIVE_TIMEOUT_S, as a loaded machine can make it)
runs once more on fresh ranks, with a warning; a second failure is reported.
The ranks exit when the pytest process does, even if it is killed.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import re
import shutil
import signal
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["DistPool"]

COLLECTIVE_TIMEOUT_S = 60.0  # a rank blocked in a collective gives up after this
READY_TIMEOUT_S = 180.0  # spawning the ranks takes 5-20 s on a loaded 2-core machine
PAYLOAD_TIMEOUT_S = 300.0  # one test's payload, on every rank
ERROR_GRACE_S = 3.0  # after one rank's error, how long the others may take to report theirs
STACK_WAIT_S = 1.0  # how long a silent rank may take to write its stack

# How gloo reports a collective that a peer did not join in time.
_COLLECTIVE_TIMEOUT = re.compile(r"Timed out waiting \d+ ?ms")


class CollectiveTimeout(AssertionError):
    """Every failing rank gave up waiting for a peer inside a collective."""


def _worker(
    rank: int,
    world_size: int,
    port: int,
    imports: tuple[str, ...],
    conn: mpc.Connection,
    stack_file: str,
    collective_timeout_s: float,
) -> None:
    import faulthandler
    import importlib

    # SIGUSR1 writes this rank's stack, even while it is blocked inside a collective.
    stacks = open(stack_file, "w")  # noqa: SIM115 (open while the rank lives)
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=False)

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.set_num_threads(1)  # the ranks share the machine's cores
    timeout = datetime.timedelta(seconds=collective_timeout_s)
    store = dist.TCPStore("127.0.0.1", port, world_size, is_master=False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timeout)
    mesh = init_device_mesh("cpu", (world_size,))
    try:
        for module in imports:
            importlib.import_module(module)
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    else:
        conn.send(("ready", None))
    parent = mp.parent_process()
    try:
        while True:
            # Exit when the coordinator dies instead of waiting on the pipe forever.
            if parent is not None and parent.sentinel in mpc.wait([conn, parent.sentinel]):
                return
            message = conn.recv()
            if message is None:
                return
            fn, args, kwargs = message
            try:
                conn.send(("ok", fn(mesh, *args, **kwargs)))
            except BaseException:
                conn.send(("error", traceback.format_exc()))
    finally:
        dist.destroy_process_group()
        # Skip the interpreter's teardown (seconds with torch loaded): nothing is left to flush.
        os._exit(0)


class DistPool:
    """`world_size` gloo ranks, started on the first `run` and after any failure; each rank
    imports the modules `imports` (`["mylib.sharding"]`) as it starts. A rank waits
    `collective_timeout_s` in a collective for its peers."""

    def __init__(
        self,
        world_size: int = 2,
        imports: Sequence[str] = (),
        collective_timeout_s: float = COLLECTIVE_TIMEOUT_S,
    ) -> None:
        self.world_size = world_size
        self.imports = tuple(imports)
        self.collective_timeout_s = collective_timeout_s
        self.starts = 0  # how many times the ranks were started
        self._procs: list[Any] = []
        self._conns: list[mpc.Connection] = []
        self._store: Any = None
        self._stack_dir: Path | None = None  # where silent ranks write their stacks
        self._ready = False  # every rank has said it is ready

    def launch(self) -> None:
        """Start the ranks without waiting for them (they take seconds to import torch)."""
        if not self._procs or not all(p.is_alive() for p in self._procs):
            self.close()
            self._spawn()

    def run(
        self,
        fn: Callable[..., Any],
        *args: Any,
        timeout_s: float = PAYLOAD_TIMEOUT_S,
        **kwargs: Any,
    ) -> list[Any]:
        """`fn(mesh, *args, **kwargs)` on every rank; the results, by rank."""
        try:
            return self._run_once(fn, args, kwargs, timeout_s)
        except CollectiveTimeout as first:
            self.close()  # a process group whose collective timed out may not work again
            warnings.warn(
                f"{_name(fn)} stalled in a collective; running it again on fresh ranks. "
                f"The first attempt:\n{first}",
                stacklevel=2,
            )
            try:
                return self._run_once(fn, args, kwargs, timeout_s)
            except CollectiveTimeout as second:
                raise CollectiveTimeout(f"{second}\n(the second attempt on fresh ranks)") from first

    def _run_once(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        timeout_s: float,
    ) -> list[Any]:
        self.launch()
        if not self._ready:
            try:
                self._gather("starting the ranks", READY_TIMEOUT_S)
            except BaseException:
                self.close()  # a rank that failed to start is of no use to the next payload
                raise
            self._ready = True
        for conn in self._conns:
            conn.send((fn, args, kwargs))
        return self._gather(_name(fn), timeout_s)

    def close(self, busy: frozenset[int] = frozenset()) -> None:
        """Stop every rank: idle ones are asked to exit, `busy` ones (and any that linger) are
        killed."""
        for rank, conn in enumerate(self._conns):
            if rank not in busy:
                try:
                    conn.send(None)
                except OSError:
                    pass
        for rank, proc in enumerate(self._procs):
            if rank in busy:
                proc.kill()
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        for conn in self._conns:
            conn.close()
        if self._stack_dir is not None:
            shutil.rmtree(self._stack_dir, ignore_errors=True)
        self._procs, self._conns, self._store, self._ready = [], [], None, False
        self._stack_dir = None

    def _stacks(self, ranks: frozenset[int]) -> str:
        """Where each of `ranks` is now: its Python stack, asked for with SIGUSR1."""
        for rank in ranks:
            if self._procs[rank].is_alive() and self._procs[rank].pid is not None:
                os.kill(self._procs[rank].pid, signal.SIGUSR1)
        time.sleep(STACK_WAIT_S)
        texts = []
        for rank in sorted(ranks):
            path = self._stack_file(rank)
            stack = path.read_text().strip() if path.exists() else ""
            texts.append(f"--- rank {rank}, where it was stuck ---\n{stack or '(no stack)'}")
        return "\n".join(texts)

    def _stack_file(self, rank: int) -> Path:
        assert self._stack_dir is not None, "the ranks are not started"
        return self._stack_dir / f"rank{rank}.txt"

    def _spawn(self) -> None:
        import torch.distributed as dist

        ctx = mp.get_context("spawn")  # fork is unsafe once torch has started threads
        self._stack_dir = Path(tempfile.mkdtemp(prefix="opgen-ranks-"))
        self._store = dist.TCPStore(
            "127.0.0.1",
            0,
            self.world_size,
            is_master=True,
            wait_for_workers=False,
            timeout=datetime.timedelta(seconds=self.collective_timeout_s),
        )
        for rank in range(self.world_size):
            ours, theirs = ctx.Pipe()
            proc = ctx.Process(
                target=_worker,
                args=(
                    rank,
                    self.world_size,
                    self._store.port,
                    self.imports,
                    theirs,
                    str(self._stack_file(rank)),
                    self.collective_timeout_s,
                ),
                name=f"dist-rank{rank}",
                daemon=True,
            )
            proc.start()
            theirs.close()
            self._procs.append(proc)
            self._conns.append(ours)
        self.starts += 1

    def _gather(self, what: str, timeout_s: float) -> list[Any]:
        """One reply per rank. Raises, closing the pool unless every rank answered, on any error,
        death or timeout."""
        replies: dict[int, tuple[str, Any]] = {}
        deadline = time.monotonic() + timeout_s
        while len(replies) < self.world_size:
            waiting: dict[Any, int] = {c: r for r, c in enumerate(self._conns) if r not in replies}
            sentinels: dict[Any, int] = {
                p.sentinel: r for r, p in enumerate(self._procs) if r not in replies
            }
            ready: list[Any] = mpc.wait(
                [*waiting, *sentinels], timeout=max(0.0, deadline - time.monotonic())
            )
            if not ready:
                busy = frozenset(waiting.values())
                if any(kind == "error" for kind, _ in replies.values()):
                    break  # the others are likely blocked in a collective the failed rank left
                stacks = self._stacks(busy)
                self.close(busy)
                raise TimeoutError(
                    f"{what}: ranks {sorted(busy)} did not answer within {timeout_s:.0f} s\n"
                    + stacks
                )
            self._receive(what, ready, waiting, sentinels, replies)
            if any(kind == "error" for kind, _ in replies.values()):
                deadline = min(deadline, time.monotonic() + ERROR_GRACE_S)
        self._raise_errors(what, replies)
        return [replies[r][1] for r in range(self.world_size)]

    def _receive(
        self,
        what: str,
        ready: list[Any],
        waiting: dict[Any, int],
        sentinels: dict[Any, int],
        replies: dict[int, tuple[str, Any]],
    ) -> None:
        """The replies of the ranks whose pipe or process is `ready` into `replies`; a rank that
        died instead closes the pool and raises."""
        for obj in ready:
            rank = waiting.get(obj, sentinels.get(obj))
            if rank is None or rank in replies:
                continue
            try:
                if obj in waiting:
                    replies[rank] = obj.recv()
                    continue
            except EOFError:  # the rank closed its end: it is dying
                pass
            self._procs[rank].join(timeout=5)
            code = self._procs[rank].exitcode
            self.close(frozenset(r for r in range(self.world_size) if r not in replies))
            raise RuntimeError(f"{what}: rank {rank} died (exit code {code})")

    def _raise_errors(self, what: str, replies: dict[int, tuple[str, Any]]) -> None:
        """One error for every rank that failed, each text once with the ranks that gave it;
        ranks that did not answer are restarted."""
        by_text: dict[str, list[int]] = {}
        for rank, (kind, reply) in sorted(replies.items()):
            if kind == "error":
                by_text.setdefault(reply, []).append(rank)
        errors = [
            f"--- rank {', '.join(map(str, ranks))} ---\n{text}" for text, ranks in by_text.items()
        ]
        if not errors:
            return
        silent = frozenset(r for r in range(self.world_size) if r not in replies)
        if silent:
            errors.append(self._stacks(silent))
            self.close(silent)
            errors.append(f"(ranks {sorted(silent)} did not answer; the pool was restarted)")
        stalled = all(_COLLECTIVE_TIMEOUT.search(text) for text in by_text)
        raise (CollectiveTimeout if stalled else AssertionError)(
            f"{what} failed:\n" + "\n".join(errors)
        )


def _name(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"
