"""Print the real-env table, env x mode x result: the tests' own verdicts.

Run from the repository root (after a merge, say)::

    python -m tests.real_envs.report             # every check, about 2-3 minutes of CPU
    python -m tests.real_envs.report Pong Puck   # only the envs whose name has a word

Each row is one check of ``tests/real_envs/cases.py``: ``pass``, ``FAIL`` with the first
line of the reason, or ``missing`` when an env package cannot be imported. Progress goes
to stderr, the Markdown table to stdout; the exit status is 1 unless every row passes.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from tests.real_envs.cases import CHECKS, describe
from tests.real_envs.needs import missing_packages


def main(words: list[str]) -> int:
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="expcli-real-envs-") as tmp:
        os.chdir(tmp)  # envs write logs beside the working directory (MuJoCo does)
        for check in CHECKS:
            if words and not any(w.lower() in check.env.lower() for w in words):
                continue
            started = time.perf_counter()
            missing = missing_packages(check.needs)
            if missing:
                result = f"missing {', '.join(missing)}"
            else:
                try:
                    check.run(Path(tmp))
                    result = "pass"
                except Exception as e:  # the table reports every kind of failure
                    result = f"FAIL: {describe(e)}"
            rows.append((check.env, check.mode, result))
            seconds = time.perf_counter() - started
            print(f"{check.env} | {check.mode} | {result} ({seconds:.0f} s)", file=sys.stderr)
    _print_table(rows)
    return 0 if all(result == "pass" for _, _, result in rows) else 1


def _print_table(rows: list[tuple[str, str, str]]) -> None:
    env_width = max(3, *(len(env) for env, _, _ in rows))
    mode_width = max(4, *(len(mode) for _, mode, _ in rows))
    print(f"| {'env':<{env_width}} | {'mode':<{mode_width}} | result |")
    print(f"| {'-' * env_width} | {'-' * mode_width} | ------ |")
    for env, mode, result in rows:
        print(f"| {env:<{env_width}} | {mode:<{mode_width}} | {result} |")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
