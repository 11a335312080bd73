"""Running episode returns and lengths while a memory is written (tianshou's ``add`` report)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["EpisodeReport", "RunningEpisodes"]


@dataclass(frozen=True)
class EpisodeReport:
    """What one ``add_samples`` call did to episodes, one entry per sample written.

    Attributes:
        index: Flat index (``t * num_envs + env``) each sample was written to.
        env: Env column of each sample.
        returns: The episode's return where the sample ended an episode, else 0.
        lengths: The episode's length where the sample ended an episode, else 0.
        starts: Flat index of the first step of each sample's episode.
    """

    index: np.ndarray
    env: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray
    starts: np.ndarray

    @property
    def done(self) -> np.ndarray:
        """Which samples ended an episode."""
        return np.asarray(self.lengths > 0)


class RunningEpisodes:
    """Per-env running return, length and start of the episode being written."""

    def __init__(self, num_envs: int) -> None:
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.starts = np.zeros(num_envs, dtype=np.int64)

    def reset(self) -> None:
        """Forget the running episodes (the memory was reset or reloaded)."""
        self.returns[:] = 0.0
        self.lengths[:] = 0
        self.starts[:] = 0

    def update(
        self, env: np.ndarray, index: np.ndarray, reward: np.ndarray, done: np.ndarray
    ) -> EpisodeReport:
        """Account for samples written in this order; ``env`` repeats only for one env."""
        if len(np.unique(env)) == len(env):
            return self._update_distinct(env, index, reward, done)
        return self._update_sequence(int(env[0]), env, index, reward, done)

    def _update_distinct(
        self, env: np.ndarray, index: np.ndarray, reward: np.ndarray, done: np.ndarray
    ) -> EpisodeReport:
        fresh = self.lengths[env] == 0
        self.starts[env[fresh]] = index[fresh]
        self.returns[env] += reward
        self.lengths[env] += 1
        report = EpisodeReport(
            index,
            env,
            np.where(done, self.returns[env], 0.0),
            np.where(done, self.lengths[env], 0),
            self.starts[env].copy(),
        )
        ended = env[done]
        self.returns[ended] = 0.0
        self.lengths[ended] = 0
        return report

    def _update_sequence(
        self, env_id: int, env: np.ndarray, index: np.ndarray, reward: np.ndarray, done: np.ndarray
    ) -> EpisodeReport:
        """Many consecutive steps of one env: segments split after each done flag."""
        n = len(index)
        begins = np.concatenate([[True], done[:-1]])
        first = np.flatnonzero(begins)  # position where each segment begins
        segment = np.cumsum(begins) - 1
        sums = np.add.reduceat(reward.astype(np.float64), first)
        sums[0] += self.returns[env_id]
        steps_in = np.arange(n) - first[segment] + 1
        steps_in[segment == 0] += self.lengths[env_id]
        seg_starts = index[first]
        if self.lengths[env_id] > 0:
            seg_starts[0] = self.starts[env_id]
        starts = seg_starts[segment]
        report = EpisodeReport(
            index,
            env,
            np.where(done, sums[segment], 0.0),
            np.where(done, steps_in, 0),
            starts,
        )
        if done[-1]:
            self.returns[env_id], self.lengths[env_id] = 0.0, 0
        else:
            self.returns[env_id] = sums[-1]
            self.lengths[env_id] = steps_in[-1]
            self.starts[env_id] = starts[-1]
        return report
