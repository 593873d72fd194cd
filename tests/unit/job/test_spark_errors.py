"""A failed Spark job is reported by its cause, not by the first screenful of a JVM stack trace."""
from __future__ import annotations

from eventdedup.errors import CorruptStateError, EventDedupError
from eventdedup.job.driver import _unwrapped

WORKER_TRACE = """An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/x/pyspark/worker.py", line 1, in main
    process()
  File "/x/botocore/client.py", line 1094, in _make_api_call
    raise error_class(parsed_response, operation_name)
botocore.exceptions.ClientError: An error occurred (AccessDenied) when calling the PutObject operation: denied

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:1)
""" + "\tat org.apache.spark.Some.frame(Frame.scala:1)\n" * 200


def test_the_workers_last_exception_line_is_the_message() -> None:
    error = _unwrapped(Exception(WORKER_TRACE), "b7")
    assert type(error) is EventDedupError
    assert str(error) == ("batch b7: the Spark job failed: botocore.exceptions.ClientError: An error occurred "
                          "(AccessDenied) when calling the PutObject operation: denied")


def test_our_own_errors_keep_their_type_and_message() -> None:
    text = WORKER_TRACE.replace("botocore.exceptions.ClientError: An error occurred (AccessDenied) when calling the "
                                "PutObject operation: denied",
                                "eventdedup.errors.CorruptStateError: cache segment s3://b/x.seg fails its checksum")
    error = _unwrapped(Exception(text), "b7")
    assert type(error) is CorruptStateError and str(error) == "cache segment s3://b/x.seg fails its checksum"
