"""``CheckOutcome``: what one data-quality check found in one partition.

Small and plain on purpose: the Dagster adapter (``assets/checks.py``) turns it into an
``AssetCheckResult``, the CLI and tests read it directly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

MAX_EXAMPLES = 5


@dataclass(frozen=True)
class CheckOutcome:
    """``checked`` rows were looked at, ``failed`` of them broke the check (the count of
    its most broken rule; each rule's count is in ``observed["broken_rules"]``; for
    quantiles, the number of quantiles out of range).
    ``blocking`` is true when a failure must stop embedding and activation (severity
    ERROR). ``threshold`` says what was expected, ``observed`` what was measured, and
    ``examples`` holds a few offending rows (ids and the values that broke the rule)."""

    name: str
    asset: str
    passed: bool
    severity: str  # "ERROR" | "WARN"
    checked: int
    failed: int
    message: str
    threshold: dict[str, Any] = field(default_factory=dict)
    observed: dict[str, Any] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    engine: str = "pandas"  # or "great_expectations" (the distribution checks)
    partition: str = ""  # the partition key the check ran on ("<kb>|<strategy_version>")

    @property
    def blocking(self) -> bool:
        return self.severity == "ERROR"

    @property
    def blocks(self) -> bool:
        """Whether this outcome stops the pipeline (a failed blocking check)."""
        return self.blocking and not self.passed

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "blocking": self.blocking}


def blocking_failures(outcomes: list[CheckOutcome]) -> list[CheckOutcome]:
    return [o for o in outcomes if o.blocks]
