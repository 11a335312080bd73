"""The episode table equals the episodes found the slow way, on random wrapped memories."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from expcli import RandomMemory
from expcli.shaping.episode_table import column_runs, scan_episodes
from tests.replay.episode_data import memories
from tests.shaping.reference import episodes


@settings(max_examples=150, deadline=None)
@given(memory=memories)
def test_table_matches_the_clock(memory: RandomMemory) -> None:
    dataset = memory.to_dataset()
    table = scan_episodes(dataset)
    expected = episodes(memory)
    assert len(table) == len(expected)
    runs = column_runs(dataset)
    envs = dataset.num_envs
    for i, episode in enumerate(expected):
        assert table.column[i] == episode.env
        assert table.length[i] == len(episode.cells)
        assert table.complete[i] == episode.complete
        assert np.isclose(table.returns[i], episode.returns)
        if episode.complete:
            assert (table.terminated[i], table.truncated[i]) == (
                episode.terminated,
                episode.truncated,
            )
        column = [
            r * envs + episode.env for start, stop in runs[episode.env] for r in range(start, stop)
        ]
        position = int(table.position[i])
        assert column[position : position + len(episode.cells)] == episode.cells


def test_infos_means_and_fields() -> None:
    memory = RandomMemory(6, 2, "cpu")
    for name, size in (("rewards", 1), ("terminated", 1), ("truncated", 1), ("infos/lives", 2)):
        memory.create_tensor(
            name, size, "float32" if name in ("rewards", "infos/lives") else "bool"
        )
    done = [[0, 0], [1, 0], [0, 0], [0, 1], [0, 0], [1, 0]]
    for t in range(6):
        memory.add_samples(
            rewards=np.full((2, 1), t, dtype=np.float32),
            terminated=np.asarray(done[t], dtype=bool)[:, None],
            truncated=np.zeros((2, 1), dtype=bool),
            **{"infos/lives": np.full((2, 2), [t, t + 1], dtype=np.float32)},
        )
    table = scan_episodes(memory.to_dataset(), ["infos/lives"])
    fields = table.fields()
    # env 0 ends at t=1 and t=5; env 1 at t=3, then stays open; order by the end's row
    assert fields["env"].tolist() == [0, 1, 0, 1]
    assert fields["length"].tolist() == [2, 4, 4, 2]
    assert fields["return"].tolist() == [1.0, 6.0, 14.0, 9.0]
    assert fields["complete"].tolist() == [True, True, True, False]
    assert fields["index"].tolist() == [0, 1, 2, 3]
    assert np.allclose(fields["infos/lives"], [1.0, 2.0, 4.0, 5.0])
