"""Sweeps of fault points: every request of a clean run, named by what it is (eventdedup_dev.s3_requests),
failed in turn, so that each run of a sweep covers the same requests however they interleave; and
which of them a faulted run never made (a request that happens only in some interleavings). The
longer sweeps run whole under `make soak` (-m soak) and, in `make test`, a share of them: every Nth
point and every conditional write."""
from __future__ import annotations

from collections.abc import Sequence

from eventdedup_dev.s3_requests import FaultPoint, S3Request


def dealt(points: Sequence[FaultPoint], shard: int, shards: int) -> list[FaultPoint]:
    """Shard `shard` of `shards` interleaved shards: together they hold every point once."""
    return list(points[shard::shards])


def with_conditional_writes(chosen: Sequence[FaultPoint], points: Sequence[FaultPoint]) -> list[FaultPoint]:
    """`chosen`, and every conditional write (PUT if-none-match: the journal, the log commit, the
    load manifest, the batch manifest, the Delta commit) of `points` it lacks, in request order:
    where a fault matters most is in every share of a sweep."""
    keep = {(point.identity, point.occurrence) for point in chosen}
    return [point for point in points if (point.identity, point.occurrence) in keep
            or (point.identity is not None and point.identity.endswith(" if-none-match"))]


def share(points: Sequence[FaultPoint], sweep: str, stride: int, offset: int = 0) -> list[FaultPoint]:
    """What a sweep runs: `every` point (`make soak`), or `make test`'s `sampled` share, every
    `stride`th point from `offset` plus every conditional write."""
    if sweep == "every":
        return list(points)
    assert sweep == "sampled", sweep
    return with_conditional_writes(dealt(points, offset % stride, stride), points)


class Unreached:
    """The points of a sweep whose request a faulted run never made: said in the test's output,
    and bounded, so that a matcher that names nothing cannot pass a sweep by failing nothing."""

    def __init__(self, swept: str) -> None:
        self.swept = swept
        self.points: list[FaultPoint] = []
        self.total = 0

    def note(self, point: FaultPoint, reached: S3Request | None) -> None:
        self.total += 1
        if reached is None:
            self.points.append(point)
        else:
            assert reached.identity == point.identity or point.identity is None, (point, reached)

    def report(self, at_most: float = 0.1) -> None:
        print(f"{self.swept}: {self.total} fault points, {len(self.points)} never reached: "
              f"{[str(point) for point in self.points]}")
        assert len(self.points) <= at_most * self.total, (
            f"{self.swept}: {len(self.points)} of {self.total} fault points never reached; the sweep failed too little")



def position_of(request: S3Request, requests: Sequence[S3Request]) -> int:
    """Where in a log this very request (not an equal one) arrived."""
    return next(number for number, logged in enumerate(requests) if logged is request)
