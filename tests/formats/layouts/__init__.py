"""Tests of expcli.formats.layouts: tianshou, Minari, D4RL and skrl files, both directions."""
