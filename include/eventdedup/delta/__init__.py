"""The output as a Delta Lake table, projected from the commit log (eventdedup.delta.projection),
and its upkeep: compaction and a vacuum that never deletes what the log names (eventdedup.delta.upkeep)."""
