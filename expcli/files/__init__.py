"""Files written safely: the layer beneath every writer (formats, collect, report, plugins).

``atomic`` (a temporary in the target's folder, renamed into place when complete),
``output_lock`` (one writer per output), ``temp_names`` (temporaries, and those a killed
writer left), ``free_space`` (room for an output, and the error when there is none). They
import only ``expcli.errors``.
"""
