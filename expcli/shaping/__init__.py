"""Reshape datasets by whole episodes: merge, split, filter."""
