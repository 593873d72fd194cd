"""Running the pipeline: one batch end to end, scheduling helpers, alerts and status."""
