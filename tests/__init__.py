"""expcli test suite."""
