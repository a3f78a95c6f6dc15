"""What a check found (``quality.checks`` returns it, ``quality.run`` reports it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Finding:
    """What a check found: the failing rows, and each broken rule's count (a rule of the
    whole table, a quantile say, reports what it observed instead of rows).

    ``masks``: which rules each failing row broke (one boolean column per rule), what lets
    the findings of a partition's groups of documents be added up (``quality.run.CheckRun``);
    ``count``: the failing rows when ``failing`` holds only the worst of them. A rule in
    ``applies`` (the rows it applies to) fails only when more than ``share`` of those rows
    break it (``Finding.settle``)."""

    failing: Any = None  # pd.DataFrame of the rows that broke a rule (None for table rules)
    broken: dict[str, Any] = field(default_factory=dict)  # rule -> rows breaking it, or what was observed
    observed: dict[str, Any] = field(default_factory=dict)
    detail: str = ""  # said in the message after the counts (quantile figures)
    masks: Any = None  # pd.DataFrame: a boolean column per rule, a row per failing row
    count: int | None = None
    applies: dict[str, int] = field(default_factory=dict)
    share: float | None = None

    @classmethod
    def rows(
        cls, rules: Mapping[str, pd.Series], frame: pd.DataFrame, *, applies: Mapping[str, int] | None = None,
        share: float | None = None,
    ) -> Finding:  # fmt: skip
        """From boolean masks over ``frame``, one per rule (True: the row breaks it)."""
        import pandas as pd

        masks = pd.DataFrame({rule: mask.to_numpy(dtype=bool) for rule, mask in rules.items()}, index=frame.index)
        any_bad = masks.any(axis=1).to_numpy() if len(rules) else [False] * len(frame)
        found = cls(frame[any_bad], {}, masks=masks[any_bad], applies=dict(applies or {}), share=share)
        found.broken = {rule: int(n) for rule, n in found.masks.sum().items() if n}
        return found.settle()

    def settle(self) -> Finding:
        """Drop the rules that a share of their rows may break (``applies``, ``share``) and
        are within it, and the rows that broke only those."""
        if self.share is None or self.masks is None:
            return self
        within = [r for r in self.masks.columns if self.masks[r].sum() <= self.share * self.applies.get(r, 0)]
        if within:
            self.masks = self.masks.drop(columns=within)
            keep = self.masks.any(axis=1).to_numpy()
            self.failing, self.masks = self.failing[keep], self.masks[keep]
            self.broken = {r: n for r, n in self.broken.items() if r not in within}
        return self

    @property
    def failed(self) -> int:
        if self.failing is not None and (len(self.failing) or self.count):
            rows = self.count if self.count is not None else len(self.failing)
            return max([rows] + [v for v in self.broken.values() if isinstance(v, int)])
        return len(self.broken)
