"""expcli's own formats and layouts, one object per module, named in ``formats.table``.

Each module is small and imports only the base types and the sniffing tests: its methods
import the module that does the work (``pt_format``, ``hdf5_format``, ...) when first
called, so that reading the table (names, suffixes, help texts) loads neither torch, h5py
nor pyarrow.
"""
