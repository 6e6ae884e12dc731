"""From run outputs to numbers: metric readers, run summaries, the selection, statistics, scaling relations,
the per-dataset index, tables and figures."""
