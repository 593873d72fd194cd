"""What tests share: readers of committed rows, invariants, the plain reference model of the
dedup rules, the S3 client fault wrapper, and the test configuration."""
