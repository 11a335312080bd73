"""Circular memories of torch tensors with skrl's API (this package owns torch)."""

from expcli.memory.base import Memory
from expcli.memory.random_memory import RandomMemory

__all__ = ["Memory", "RandomMemory"]
