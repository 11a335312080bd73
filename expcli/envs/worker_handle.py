"""The parent's handle on one subproc worker: starting it, talking to it, stopping it.

A worker ignores SIGINT and SIGTERM as soon as it runs (not while Python starts it): a
Ctrl-C or a ``kill`` sent to the whole process group is the parent's to handle, and the
parent stops its workers itself. Started from the main thread on Linux, a worker also
dies with the parent, so that one hung in an env never outlives it.

``spawn`` makes a worker run the parent's main module again, as multiprocessing does,
when that module is a file; a main module that is not one (``python -``, a notebook) is
left alone, so workers start whatever the main program is.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from multiprocessing.context import SpawnContext
from typing import Any

from expcli.envs.subproc_worker import (
    PICKLED,
    STEP_ALL,
    STEP_ALL_RESET,
    Command,
    Doorbell,
    Factory,
    SharedBuffers,
    worker_main,
)
from expcli.errors import EnvError

__all__ = ["WorkerHandle"]

_CLOSE_TIMEOUT = 5.0


class WorkerHandle:
    """One worker process: its slice ``start .. stop - 1`` of the envs, pipe and process.

    Attributes:
        busy: A command was sent (or the worker is starting) and not answered yet.
    """

    def __init__(
        self,
        ctx: SpawnContext,
        index: int,
        start: int,
        factories: Sequence[Factory],
        shared: SharedBuffers,
        progress: Any,
        restart_on_error: bool,
        no_warning: bool,
        cpu: int | None,
        label_offset: int = 0,
    ) -> None:
        self.index, self.start, self.stop = index, start, start + len(factories)
        self.label_offset = label_offset
        self.conn, child = ctx.Pipe()
        die_with_parent = threading.current_thread() is threading.main_thread()
        self.process = ctx.Process(
            target=worker_main,
            args=(
                child,
                list(factories),
                start,
                shared,
                (progress, index),
                restart_on_error,
                no_warning,
                cpu,
                os.getpid() if die_with_parent else None,
            ),
            name=f"expcli-env-worker-{index}",
            daemon=True,
        )
        with _without_unloadable_main():
            self.process.start()
        child.close()
        self.busy = True
        self._doorbell = Doorbell(self.conn)

    def send(self, command: Command, payload: Any) -> None:
        """Send a command with a pickled payload to the worker."""
        self._send(PICKLED + pickle.dumps((command, payload), pickle.HIGHEST_PROTOCOL), command)

    def send_step_all(self, autoreset: bool) -> None:
        """The common step, as one byte: every env of the slice, actions in shared memory."""
        self._send(STEP_ALL_RESET if autoreset else STEP_ALL, Command.STEP)

    def _send(self, message: bytes, command: Command) -> None:
        try:
            self.conn.send_bytes(message)
        except (BrokenPipeError, ConnectionResetError, OSError) as e:
            raise self.died(command) from e
        self.busy = True

    def readable(self, seconds: float) -> bool:
        """Whether an answer (or the end of the pipe) is there, waiting up to ``seconds``."""
        return self._doorbell.ready(seconds)

    def receive(self, command: Command) -> Any:
        """The worker's answer; None for a step with nothing to report.

        Raises:
            EnvError: An env failed (the worker lives on), or the worker is gone.
        """
        try:
            message = self.conn.recv_bytes()
        except (EOFError, ConnectionResetError, OSError) as e:
            raise self.died(command) from e
        self.busy = False
        if not message:
            return None
        ok, result = pickle.loads(message)  # our own worker's reply
        if not ok:
            raise result.to_error()
        return result

    @property
    def envs(self) -> str:
        """``first..last`` as messages show them."""
        return f"{self.start + self.label_offset}..{self.stop - 1 + self.label_offset}"

    def died(self, command: Command) -> EnvError:
        """The error for a worker that vanished, naming how (exit code or signal)."""
        self.process.join(timeout=1.0)
        code = self.process.exitcode
        if code is not None and code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        elif code is not None:
            how = f"exited with code {code}"
        else:
            how = "stopped answering"
        hint = ""
        if command == Command.START and code == 1:
            hint = (
                "; workers are started with 'spawn', which re-imports your main module: "
                "does the code that builds the ParallelEnv run under "
                "'if __name__ == \"__main__\":'?"
            )
        return EnvError(
            f"worker process {self.index} (envs {self.envs}) {how} during "
            f"{command.name.lower()}{hint}",
            index=self.start,
        )

    def kill(self) -> None:
        """Stop the worker at once (it may be stuck in an env)."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join()

    def shutdown(self) -> None:
        """Close the envs politely, or kill a worker that is still busy; release the pipe."""
        if self.busy:
            self.kill()
        elif self.process.is_alive():
            try:
                self.conn.send_bytes(PICKLED + pickle.dumps((Command.CLOSE, None)))
                if self.conn.poll(_CLOSE_TIMEOUT):
                    self.conn.recv_bytes()
            except (OSError, EOFError):
                pass
            self.process.join(timeout=_CLOSE_TIMEOUT)
            self.kill()
        self.conn.close()


@contextlib.contextmanager
def _without_unloadable_main() -> Iterator[None]:
    """Start a process without a main module that spawn cannot run again."""
    main = sys.modules.get("__main__")
    hidden = _unloadable_main_file(main)
    if hidden is not None:
        del main.__file__  # type: ignore[union-attr]
    try:
        yield
    finally:
        if hidden is not None:
            main.__file__ = hidden  # type: ignore[union-attr]


def _unloadable_main_file(main: Any) -> str | None:
    """The main module's ``__file__`` when spawn would try, and fail, to run it again.

    Code read from stdin (``<stdin>``), or a notebook.
    """
    if main is None or getattr(main, "__spec__", None) is not None:
        return None  # `python -m`: spawn imports the module by name
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or "__file__" not in vars(main):
        return None
    if os.path.isfile(path) and not path.endswith(".ipynb"):
        return None
    return path
