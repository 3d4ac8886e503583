"""What `modelship tune` may change about one served model, and the moves between neighbouring configs.

A `Candidate` is one serving config: which of the export's verified artifacts serves, how many instances, how many
intra-op threads each (instances x threads never above the server's cores), the largest batch the dynamic batcher
forms and how long it waits to form it. Client concurrency is not part of it: it is what each candidate is measured
at (serve.tune.concurrency). Pure: no server, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from itertools import product

from modelship.contract.errors import UsageError
from modelship.contract.json_object import JsonObject

BATCH_SIZES = (1, 4, 8, 16, 32)
QUEUE_DELAYS_US = (0, 100, 1000, 5000)
MAX_CONCURRENCY = 32


@dataclass(frozen=True, order=True)
class Candidate:
    """One serving config of one model (`artifact`: the served model that answers)."""

    artifact: str
    instances: int
    threads: int
    max_batch_size: int
    queue_delay_us: int

    def describe(self) -> str:
        return (
            f"{self.artifact} x{self.instances} inst, {self.threads} thr, batch<={self.max_batch_size}, "
            f"delay {self.queue_delay_us} µs"
        )

    def to_dict(self) -> JsonObject:
        return asdict(self)


@dataclass(frozen=True)
class Space:
    """Every candidate tune may measure: the artifacts, the server's cores, the batch sizes and queue delays, and
    the client concurrencies each candidate may be measured at (1 to `max_concurrency`)."""

    artifacts: tuple[str, ...]
    cores: int
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    queue_delays_us: tuple[int, ...] = QUEUE_DELAYS_US
    max_concurrency: int = MAX_CONCURRENCY

    def __post_init__(self) -> None:
        if not self.artifacts:
            raise UsageError("nothing to tune: the model has no verified artifact served")
        if self.cores < 1 or self.max_concurrency < 1:
            raise UsageError(f"cores and concurrency must be at least 1, got {self.cores}, {self.max_concurrency}")
        for name, values in (("batch sizes", self.batch_sizes), ("queue delays", self.queue_delays_us)):
            if not values or list(values) != sorted(set(values)):
                raise UsageError(f"{name} must be distinct and ascending, got {list(values)}")

    def placements(self) -> list[tuple[int, int]]:
        """(instances, threads) pairs whose product stays within the cores, fewest instances first."""
        return [(i, t) for i in range(1, self.cores + 1) for t in range(1, self.cores // i + 1)]

    def candidates(self) -> Iterator[Candidate]:
        """The whole grid (what brute force measures)."""
        for artifact, (instances, threads), batch, delay in product(
            self.artifacts, self.placements(), self.batch_sizes, self.queue_delays_us
        ):
            yield Candidate(artifact, instances, threads, batch, delay)

    def __contains__(self, candidate: object) -> bool:
        return (
            isinstance(candidate, Candidate)
            and candidate.artifact in self.artifacts
            and (candidate.instances, candidate.threads) in self.placements()
            and candidate.max_batch_size in self.batch_sizes
            and candidate.queue_delay_us in self.queue_delays_us
        )

    def nearest(self, candidate: Candidate) -> Candidate:
        """`candidate` moved onto the grid: the published default may sit between its values."""
        placements = self.placements()
        placement = min(placements, key=lambda p: (abs(p[0] - candidate.instances), -p[1]))
        if (candidate.instances, candidate.threads) in placements:
            placement = (candidate.instances, candidate.threads)
        return Candidate(
            candidate.artifact if candidate.artifact in self.artifacts else self.artifacts[0],
            *placement,
            _nearest(self.batch_sizes, candidate.max_batch_size),
            _nearest(self.queue_delays_us, candidate.queue_delay_us),
        )

    def neighbours(self, candidate: Candidate) -> list[Candidate]:
        """One move away: another artifact; one instance more or fewer (threads filling the cores) or one thread
        more or fewer; the next batch size or queue delay either side. Artifacts first: they matter most. A
        candidate off the grid (a published default) moves from its nearest point on it, that point included."""
        off_grid = candidate not in self
        candidate = self.nearest(candidate)
        moves = [candidate] if off_grid else []
        moves += [replace(candidate, artifact=a) for a in self.artifacts if a != candidate.artifact]
        for instances in (candidate.instances - 1, candidate.instances + 1):
            if 1 <= instances <= self.cores:
                moves.append(replace(candidate, instances=instances, threads=max(1, self.cores // instances)))
        for threads in (candidate.threads - 1, candidate.threads + 1):
            moves.append(replace(candidate, threads=threads))
        moves += [replace(candidate, max_batch_size=b) for b in _beside(self.batch_sizes, candidate.max_batch_size)]
        moves += [replace(candidate, queue_delay_us=d) for d in _beside(self.queue_delays_us, candidate.queue_delay_us)]
        return list(dict.fromkeys(m for m in moves if m in self and (off_grid or m != candidate)))

    def concurrencies(self) -> tuple[int, ...]:
        """The ladder brute force measures every candidate at: 1, 2, 4, ... up to max_concurrency."""
        ladder = [1]
        while ladder[-1] * 2 <= self.max_concurrency:
            ladder.append(ladder[-1] * 2)
        return tuple(ladder)


def _beside(values: tuple[int, ...], value: int) -> list[int]:
    """The values either side of `value` in `values`."""
    index = values.index(value)
    return [values[i] for i in (index - 1, index + 1) if 0 <= i < len(values)]


def _nearest(values: tuple[int, ...], value: int) -> int:
    return min(values, key=lambda v: (abs(v - value), v))
