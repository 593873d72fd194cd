"""Which landing objects a batch takes: selectors, interval batches, and the frozen batch manifest."""
