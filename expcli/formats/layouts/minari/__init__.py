"""Minari dataset folders: ``layout`` (hdf5 storage; reads every storage) and ``arrow``.

``arrow`` writes the parquet and arrow storages; the private modules are their shared parts.
"""
