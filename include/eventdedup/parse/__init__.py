"""Input bytes to parsed events: lines of an object, one event (the reference parser), a whole
object at a time (the fast path), payload fingerprints and survivor order keys. Every byte
becomes a row or a quarantine reason."""
