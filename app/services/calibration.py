"""Calibration: the provider's reported input tokens next to our own count (spec §3.4).

After each provider response the turn runner (and the proxy, for a proxied call) records one
sample per request — the counter in force, our ``estimated_input_tokens`` and the provider's
reported input tokens
(``CalibrationService.record``). Like is compared with like: the reported figure is the whole
prompt, cache reads and writes included (``Usage.input_tokens``), and the estimate is of the
whole request sent, so prompt caching moves neither side. A model's calibration, per counter,
is the mean of ``reported / estimated`` over the newest ``WINDOW`` samples with its spread (min,
max, population standard deviation); it is shown in ``GET /v1/models/{id}`` and in the context
inspection.

Applying it (setting ``apply_calibration``, default off) is limited to ``estimate`` models with
at least ``MIN_SAMPLES_TO_APPLY`` samples. Then the model's counter becomes ``CalibratedCounter``,
named ``estimate*calibrated``: every token figure of the budget — each region, so also their sum
``estimated_input_tokens``, ``dynamic_budget`` and ``reaches_auto_compact_limit`` — is
``ceil(estimate × ratio)`` per region, while the model's limits (window, effective input,
auto-compact limit, reserved output) are unchanged. Because the calibrated figure comes out of the
counter, the number shown and the number that triggers compaction stay one number (spec §3.1).
Samples are always recorded against the uncalibrated estimate, so calibration never feeds on itself.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TypedDict

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.counting import CounterWrapper, TokenCounter
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories.registry import CalibrationRepository

__all__ = [
    "CALIBRATED_SUFFIX",
    "MIN_SAMPLES_TO_APPLY",
    "UNCALIBRATED_KINDS",
    "WINDOW",
    "CalibratedCounter",
    "Calibration",
    "CalibrationService",
    "Sample",
    "applies",
    "base_counter",
    "calibrated_counter",
    "load_calibration",
    "record_calibration",
    "summarize",
]

logger = logging.getLogger(__name__)

WINDOW = 20
"""Samples the ratio is the mean of (newest first); the repository keeps a few more."""

MIN_SAMPLES_TO_APPLY = 3
"""One noisy response (a cache hit, a retried request) must not move every budget."""

CALIBRATED_SUFFIX = "*calibrated"

TRIM_EVERY = 25
"""The runner trims a model's stored samples at its first sample and then every ``TRIM_EVERY``-th
(per process), not at every model call: the table stays within ``keep + TRIM_EVERY`` rows per
writing process, and most calls save the DELETE."""

# Samples recorded by this process per (model, counter) since it last trimmed them.
_since_trim: dict[tuple[str, str], int] = {}

# The ratio is fixed to 4 decimals and applied with integer arithmetic, so the figure shown in
# ``calibration.ratio`` reproduces the budget exactly (no float ``ceil`` surprises).
_SCALE = 10_000


class SampleJson(TypedDict):
    estimated_input_tokens: int
    reported_input_tokens: int
    ratio: float
    created_at: str


class CalibrationJson(TypedDict):
    counter: str
    ratio: float
    min_ratio: float
    max_ratio: float
    stddev: float
    sample_count: int
    window: int
    applied: bool
    samples: list[SampleJson]


@dataclass(frozen=True, slots=True)
class Sample:
    estimated_input_tokens: int
    reported_input_tokens: int
    created_at: datetime

    @property
    def ratio(self) -> float:
        return self.reported_input_tokens / self.estimated_input_tokens

    def to_json(self) -> SampleJson:
        return {
            "estimated_input_tokens": self.estimated_input_tokens,
            "reported_input_tokens": self.reported_input_tokens,
            "ratio": round(self.ratio, 4),
            "created_at": self.created_at.isoformat().replace("+00:00", "Z"),
        }


@dataclass(frozen=True, slots=True)
class Calibration:
    """One model's calibration for one counter; ``samples`` newest first."""

    model_id: str
    counter: str
    ratio: float  # 4 decimals: the factor ``CalibratedCounter`` applies
    min_ratio: float
    max_ratio: float
    stddev: float
    samples: tuple[Sample, ...]
    applied: bool = False

    @property
    def sample_count(self) -> int:
        return len(self.samples)

    def to_json(self) -> CalibrationJson:
        """``CalibrationOut``: of a model (``GET /v1/models/{id}``) and of a context answer."""
        return {
            "counter": self.counter,
            "ratio": self.ratio,
            "min_ratio": self.min_ratio,
            "max_ratio": self.max_ratio,
            "stddev": self.stddev,
            "sample_count": self.sample_count,
            "window": WINDOW,
            "applied": self.applied,
            "samples": [s.to_json() for s in self.samples],
        }


def summarize(
    model_id: str, counter: str, samples: Sequence[Sample], *, applied: bool = False
) -> Calibration | None:
    """The calibration of the newest ``WINDOW`` usable samples; ``None`` when there are none."""
    usable = [s for s in samples if s.estimated_input_tokens > 0 and s.reported_input_tokens > 0]
    usable = usable[:WINDOW]
    if not usable:
        return None
    ratios = [s.ratio for s in usable]
    return Calibration(
        model_id=model_id,
        counter=counter,
        ratio=round(statistics.fmean(ratios), 4),
        min_ratio=round(min(ratios), 4),
        max_ratio=round(max(ratios), 4),
        stddev=round(statistics.pstdev(ratios), 4),
        samples=tuple(usable),
        applied=applied,
    )


class CalibratedCounter(CounterWrapper):
    """``inner``'s measures, with every region's tokens multiplied by ``ratio`` (rounded up).

    Measures stay the inner counter's (bytes for the estimate), so stored per-message figures
    remain valid whatever the ratio; only ``tokens()`` changes.
    """

    __slots__ = ("_scaled",)

    def __init__(self, inner: TokenCounter, ratio: float) -> None:
        super().__init__(inner)
        self._scaled = round(ratio * _SCALE)

    @property
    def name(self) -> str:
        return self._inner.name + CALIBRATED_SUFFIX

    @property
    def ratio(self) -> float:
        return self._scaled / _SCALE

    def tokens(self, total_measure: int) -> int:
        return -(-self._inner.tokens(total_measure) * self._scaled // _SCALE)

    def uncalibrated(self, tokens: int) -> int:
        """The inner counter's figure behind a calibrated one (exact to within rounding)."""
        return round(tokens * _SCALE / self._scaled) if self._scaled else tokens


def base_counter(counter: TokenCounter) -> TokenCounter:
    """The counter whose stored per-message figures ``counter`` uses."""
    return counter.inner if isinstance(counter, CalibratedCounter) else counter


def applies(calibration: Calibration, *, apply: bool) -> bool:
    """Whether ``apply_calibration`` adjusts budgets with ``calibration`` (see module doc)."""
    return (
        apply
        and calibration.counter == "estimate"
        and calibration.sample_count >= MIN_SAMPLES_TO_APPLY
    )


async def load_calibration(
    db: AsyncSession, model_id: str, counter: str, *, applied: bool = False
) -> Calibration | None:
    rows = await CalibrationRepository(db).recent(model_id, counter, limit=WINDOW)
    samples = [
        Sample(r.estimated_input_tokens, r.reported_input_tokens, r.created_at) for r in rows
    ]
    return summarize(model_id, counter, samples, applied=applied)


async def calibrated_counter(
    db: AsyncSession, model_id: str, counter: TokenCounter, *, apply: bool
) -> tuple[TokenCounter, Calibration | None]:
    """The counter to prepare ``model_id``'s requests with, and the calibration to show.

    Inside the caller's transaction; calibrated only when ``apply`` (the ``apply_calibration``
    setting), the counter is the estimate and enough samples exist.
    """
    calibration = await load_calibration(db, model_id, counter.name)
    if calibration is None or not applies(calibration, apply=apply):
        return counter, calibration
    return CalibratedCounter(counter, calibration.ratio), replace(calibration, applied=True)


# Provider kinds whose reported usage is no tokenizer's measurement: the ``local`` model reports
# its own rough figure of the messages (no tools, no framing), so a ratio learnt from it would
# only measure that figure against the estimate (× 0.2 after one turn) and mislead the context
# map. A ``scripted`` model reports what its script says: the script stands for a provider.
UNCALIBRATED_KINDS = frozenset({"local"})


async def record_calibration(
    db: AsyncSession,
    *,
    model_id: str,
    provider_kind: str,
    counter: TokenCounter,
    estimated_input_tokens: int,
    reported_input_tokens: int | None,
) -> tuple[str, int, int] | None:
    """Record one provider response inside the caller's transaction (the turn runner's); the
    sample as recorded (``(counter, estimated, reported)``), or ``None`` (none, or not stored).

    ``counter`` and ``estimated_input_tokens`` are the budget's; a calibrated figure is recorded
    as the estimate it came from, so calibration never learns from itself. A response without
    usage records nothing, and neither does an offline model that measures nothing
    (``UNCALIBRATED_KINDS``).

    Best effort: a sample is bookkeeping, and must never fail the turn that reports it. It is
    written in a savepoint (on PostgreSQL a failed statement would otherwise abort the caller's
    whole transaction); a failure is logged and the sample dropped.
    """
    if not reported_input_tokens or estimated_input_tokens <= 0:
        return None
    if provider_kind in UNCALIBRATED_KINDS:
        return None
    if isinstance(counter, CalibratedCounter):
        estimated_input_tokens = counter.uncalibrated(estimated_input_tokens)
    name = base_counter(counter).name
    recorded = _since_trim.get((model_id, name), 0)
    _since_trim[(model_id, name)] = (recorded + 1) % TRIM_EVERY
    try:
        async with db.begin_nested():
            await CalibrationRepository(db).add(
                model_id=model_id,
                counter=name,
                estimated_input_tokens=estimated_input_tokens,
                reported_input_tokens=reported_input_tokens,
                trim=recorded == 0,
            )
    except Exception:
        logger.warning("calibration sample of model %s not recorded", model_id, exc_info=True)
        return None
    return name, estimated_input_tokens, reported_input_tokens


class CalibrationService:
    def __init__(self, db: SessionFactory, *, apply: bool) -> None:
        self._db = db
        self.apply = apply

    async def describe(self, model_id: str, counter: str) -> Calibration | None:
        """The ``calibration`` of ``GET /v1/models/{id}`` (``None`` without samples), with
        whether this service applies it."""
        async with unit_of_work(self._db, read_only=True) as db:
            calibration = await load_calibration(db, model_id, counter)
        if calibration is None:
            return None
        return replace(calibration, applied=applies(calibration, apply=self.apply))
