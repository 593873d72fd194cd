"""The commit protocol: the log (the one source of truth), the job result promotion trusts, the
promotion gate and journal, atomic promotion, and recovery."""
