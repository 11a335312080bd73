"""The exception hierarchy: attributes, messages and exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from expcli import errors


def test_every_error_is_an_expcli_error() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.ExpcliError)


def test_messages_name_the_file_and_the_key() -> None:
    e = errors.SchemaError("expected float32, got int8", path="runs/a.npz", key="rewards")
    assert str(e) == "runs/a.npz: 'rewards': expected float32, got int8"
    assert (e.path, e.key, e.exit_code) == ("runs/a.npz", "rewards", 1)


def test_exit_codes() -> None:
    assert errors.ConfigError("bad").exit_code == 2
    assert errors.FormatError("bad").exit_code == 1


def test_env_error_keeps_index_and_remote_traceback() -> None:
    e = errors.EnvError("worker died", index=3, remote_traceback="Traceback ...\nBoom")
    assert str(e) == "env 3: worker died" and e.index == 3 and e.detail == "worker died"
    assert e.__notes__ == ["Traceback ...\nBoom"]


def test_dual_inheritance_for_stdlib_handlers() -> None:
    with pytest.raises(ImportError):
        raise errors.MissingDependencyError("ray", "ray", "the ray modes")
    with pytest.raises(FileExistsError):
        raise errors.OutputExistsError("out.pt")
    assert 'pip install "expcli[ray]"' in str(errors.MissingDependencyError("ray", "ray", "x"))


def test_no_bare_value_or_type_error_is_raised() -> None:
    """What expcli raises on purpose is an ``ExpcliError``, so the CLI prints one line for it.

    ``InvalidValueError``/``InvalidTypeError`` are also ``ValueError``/``TypeError`` for
    callers that catch those.
    """
    import ast
    from pathlib import Path

    package = Path(errors.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                name = ast.unparse(node.exc.func)
                if name in ("ValueError", "TypeError"):
                    found.append(f"{path.relative_to(package)}:{node.lineno}: {name}")
    assert not found, "\n".join(found)


def test_a_collect_job_run_before_start_is_an_order_error(tmp_path: Path) -> None:
    from expcli.collect.job import CollectJob
    from expcli.collect.settings import CollectSettings

    settings = CollectSettings(env_id="CartPole-v1", steps=4, output=tmp_path / "c.npz")
    job = CollectJob(settings)
    with pytest.raises(errors.OrderError, match=r"call start\(\) first"):
        job.run()
    assert isinstance(errors.OrderError("x"), RuntimeError)


def test_a_prioritized_draw_before_the_sampler_saw_its_storage_is_an_order_error() -> None:
    import numpy as np

    from expcli.memory import RandomMemory
    from expcli.replay import PrioritizedSampler
    from expcli.replay.storages import as_storage

    memory = RandomMemory(memory_size=4, num_envs=1, device="cpu")
    memory.create_tensor("rewards", 1)
    memory.add_samples(rewards=np.ones((1, 1), dtype=np.float32))
    with pytest.raises(errors.OrderError, match="before update"):
        PrioritizedSampler().sample(as_storage(memory), 2, np.random.default_rng(0))
