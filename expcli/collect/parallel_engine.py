"""The ``ParallelEnv`` engines (``dummy``, ``subproc``, ``ray``, ``ray-subproc``): their builder.

Every one of them gives the same bytes for the same seed: a ``ParallelEnv`` of Gymnasium
envs, wrapped as asked, in this process, in worker processes or in Ray actors.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from expcli.collect.engine_spec import AutoQuery, BuiltEnvs, EngineRequest
from expcli.envs.modes import AsyncMode

__all__ = ["check_gym_id", "parallel_builder", "worth_processes"]


def check_gym_id(env_id: str) -> str:
    """``env_id`` checked as Gymnasium's (``env_ids.check_env_id``).

    Raises:
        ConfigError: An unknown env id (with "did you mean").
    """
    from expcli.envs.env_ids import check_env_id

    return check_env_id(env_id)


def parallel_builder(para_mode: str) -> Callable[[EngineRequest], BuiltEnvs]:
    """The builder of a ``ParallelEnv`` of ``para_mode`` (its backend).

    Its builder raises ``ConfigError`` (an unknown env id, bad kwargs) or ``EnvError``
    (the envs could not be built).
    """

    def build(request: EngineRequest) -> BuiltEnvs:
        from expcli.envs import ParallelEnv

        check_gym_id(request.env_id)
        asynchronous = request.asynchronous
        envs = ParallelEnv.from_id(
            request.env_id,
            request.num_envs,
            para_mode=para_mode,
            asynchronous=None if asynchronous is AsyncMode.NONE else asynchronous.value,
            num_cpus=request.num_cpus,
            address=request.ray_address,
            step_timeout=request.step_timeout,
            wrappers=request.wrappers,
            **request.env_kwargs,
        )
        return BuiltEnvs(envs)

    return build


def worth_processes(query: AutoQuery) -> bool:
    """Whether worker processes may step faster: two envs or more, and two cores or more."""
    return query.num_envs >= 2 and (os.cpu_count() or 1) >= 2
