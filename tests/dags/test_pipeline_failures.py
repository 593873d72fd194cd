"""Failures inside the pipeline DAG: a promotion that fails alerts (S3 alert object, structured log
line, SNS) and halts the next run until `eventdedup recover`; a task that fails after its side
effect and is retried gives exactly the output of a run that never failed.

SNS is moto's (the AWS API mocks beside the S3 store: SNS cannot run here), read back through an
SQS queue subscribed to the topic: the real SnsNotifier publishes through the aws_default
connection, which routes SNS to the mocks.
"""
from __future__ import annotations

import orjson
import pytest

from eventdedup.layout import Layout
from eventdedup.promotion.recovery import recover
from eventdedup.s3store import S3Store
from eventdedup_dev.s3_requests import first_request

from ..support.helpers import commit_counts, committed_rows, make_config
from .test_pipeline_dag import STEP, batch_id, rows, run_interval, upload_in_consecutive_intervals


@pytest.fixture
def sns_topic(aws_mocks, monkeypatch):  # type: ignore[no-untyped-def]
    sns, sqs = aws_mocks.client("sns"), aws_mocks.client("sqs")
    topic = sns.create_topic(Name="eventdedup-alerts")["TopicArn"]
    queue_url = sqs.create_queue(QueueName="eventdedup-alerts-inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    monkeypatch.setenv("EVENTDEDUP_ALERT_SNS_TOPIC_ARN", topic)

    def received() -> list[dict]:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        return [orjson.loads(m["Body"]) for m in messages]
    return received


def test_a_failed_promotion_alerts_and_halts_the_next_run_until_recover(
        pipeline_dag, pipeline_config, s3_server, bucket, dag_proxy, sns_topic) -> None:
    store = S3Store(s3_server.client(), bucket)
    t0 = upload_in_consecutive_intervals([store], dag_proxy)
    first, second = t0, t0 + STEP
    # The first promotion copy fails once (a transient S3 error, not a dead process).
    dag_proxy.arm(first_request(lambda r: r.verb == "COPY", "the first COPY"), sticky=False)
    _, states = run_interval(pipeline_dag, first)
    assert states["dedup_batch"] == "success" and states["promote_batch"] == "failed", states
    assert dag_proxy.faulted is not None and dag_proxy.faulted.verb == "COPY"
    alert = orjson.loads(store.get_bytes(f"alerts/{batch_id(first)}.json"))
    assert (alert["kind"], alert["batch_id"]) == ("promotion_failed", batch_id(first))
    assert "InjectedCrash" in alert["message"]
    published = sns_topic()
    assert [m["Subject"] for m in published] == [f"eventdedup promotion failed: batch {batch_id(first)}"]
    assert "InjectedCrash" in published[0]["Message"]

    # The next interval's run halts at the gate, alerting, and stages nothing.
    _, states = run_interval(pipeline_dag, second)
    assert states["check_consistency"] == "failed" and states["stage_batch"] == "upstream_failed", states
    halted = orjson.loads(store.get_bytes(f"alerts/{batch_id(second)}.json"))
    assert halted["kind"] == "pipeline_halted" and f"batch {batch_id(first)} can be rolled forward" in halted["message"]
    assert [m["Subject"] for m in sns_topic()] == [f"eventdedup pipeline halted: batch {batch_id(second)}"]
    assert not list(store.list(f"_eventdedup/state/batches/{batch_id(second)}/"))

    # A person runs `eventdedup recover`: the first batch is rolled forward; the pipeline goes on.
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 2})
    assert recover(store, config).consistent
    for start in (first, second):
        _, states = run_interval(pipeline_dag, start)
        assert set(states.values()) == {"success"}, states
    assert sorted(commit_counts(store, config)) == [batch_id(first), batch_id(second)]


def test_promotion_failing_after_its_commit_then_retried_gives_identical_output(
        pipeline_dag, pipeline_config, s3_server, bucket, dag_proxy, tmp_path) -> None:
    store = S3Store(s3_server.client(), bucket)
    t0 = upload_in_consecutive_intervals([store], dag_proxy)
    config = make_config(s3_server.endpoint_url, bucket, dedup={"buckets": 2})
    # The commit PUT takes effect, its reply is lost: the task fails after its side effect.
    dag_proxy.arm(first_request(lambda r: r.verb == "PUT" and r.key.startswith("_eventdedup/log/"), "the commit's PUT"),
                  "lose_response", sticky=False)
    _, states = run_interval(pipeline_dag, t0)
    assert states["promote_batch"] == "failed", states
    assert dag_proxy.faulted is not None and dag_proxy.faulted.key.startswith("_eventdedup/log/")
    assert sorted(commit_counts(store, config)) == [batch_id(t0)]  # committed all the same
    after_failure = rows(store, config)
    _, states = run_interval(pipeline_dag, t0)  # the retry: every task runs again
    assert set(states.values()) == {"success"}, states
    assert rows(store, config) == after_failure
    assert len(commit_counts(store, config)) == 1
    leftovers = [o.key for o in store.list("_eventdedup/") if "/staging/" in o.key or "/journal/" in o.key]
    assert leftovers == []
    assert committed_rows(store, config, "data")  # and there is output to compare
    assert Layout(config.layout).alert(batch_id(t0)) in [o.key for o in store.list("alerts/")]
