"""What counts as a duplicate and what becomes of it: the per-key decision and the survivor rule."""
