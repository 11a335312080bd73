"""Tests of expcli.formats: round trips, sniffing, corrupt and unsafe files, atomic writes."""
