"""Promotion and recovery: finishing a commit of the log (eventdedup.commit) and rolling the Delta
table (eventdedup.delta) forward to it; above both, so that the log knows nothing of its projection."""
