"""Foreign layouts: other libraries' experience files, recognised by their structure.

* ``skrl``: skrl's memory exports (pt, npz, csv). Read by the pt, npz and csv readers
  (a file without expcli's metadata is a full skrl memory); written by ``skrl_layout``.
* ``tianshou``: ``ReplayBuffer.save_hdf5`` of a ReplayBuffer or a VectorReplayBuffer.
* ``minari``: a Minari dataset folder (``data/main_data.hdf5`` with ``episode_*`` groups
  and ``data/metadata.json``), or its ``main_data.hdf5`` alone; or in parquet or arrow
  storage (``data/<id>/part-0.parquet`` per episode: ``minari.arrow``).
* ``d4rl``: D4RL HDF5 files (``observations``, ``actions``, ``rewards``, ``terminals``,
  ``timeouts`` at the root).
* ``lerobot``: a LeRobot v3.0 dataset folder (``meta/info.json``, ``data/chunk-*/*.parquet``),
  which ``LeRobotDataset(repo_id, root=DIR)`` loads (``lerobot.layout``).

Every layout is read into expcli's schema: ``(T, N, *feature)`` tensors named
``observations``, ``next_observations``, ``actions``, ``rewards``, ``terminated``,
``truncated`` (plus ``infos/...`` and other extras), a circular state and metadata
``{"layout": NAME, NAME: {...}, ...}``. Episode-wise layouts (Minari, D4RL) are one env
column, ``N = 1``. Each module's docstring says how its layout maps, in particular where
``next_observations`` comes from when the layout keeps it implicitly.

This package is a face: the layouts' dispatch (``write_layout``, ``layout_format``) is the
registry's, reading a foreign HDF5 file the table's, and the layout names ``rows``'; it
imports them and defines nothing. Its modules are each a layout's working code, imported
by the layout objects of ``formats.builtin`` when used; importing this package loads numpy
only (h5py and torch are imported when used).
"""

from __future__ import annotations

from expcli.formats.layout_keys import LOSSES_KEY, SEAMS_KEY, STARTS_CUT_KEY
from expcli.formats.registry import LAYOUTS, layout_format, storage_or_format, write_layout
from expcli.formats.rows import Layout
from expcli.formats.table import read_foreign_hdf5

__all__ = [
    "LAYOUTS",
    "LOSSES_KEY",
    "SEAMS_KEY",
    "STARTS_CUT_KEY",
    "Layout",
    "layout_format",
    "read_foreign_hdf5",
    "storage_or_format",
    "write_layout",
]
