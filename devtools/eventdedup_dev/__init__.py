"""Development tools for eventdedup, not part of the product: the embedded S3 store (SeaweedFS) and AWS API mocks (moto), the
S3 fault proxy, the planted sample streams and the planted-batches demo. Tests, benchmarks and
the local demos use them; `pip install eventdedup` never pulls them (nor moto)."""
