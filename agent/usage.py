"""Token usage and cost arithmetic."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0  # uncached input
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        # a turn starts from zero and most rounds add one report: no new object for that
        if not (self.input_tokens or self.output_tokens or self.cache_read_tokens or self.cache_write_tokens):
            return other
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def total_input(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def cost(self, input_per_1m: float, output_per_1m: float) -> float:
        """Cost in the price unit. Cache reads are billed at 10% and writes at 125% of input
        (Anthropic's published ratios; OpenAI-compatible endpoints report no writes)."""
        billed_in = self.input_tokens + 0.1 * self.cache_read_tokens + 1.25 * self.cache_write_tokens
        return (billed_in * input_per_1m + self.output_tokens * output_per_1m) / 1_000_000
