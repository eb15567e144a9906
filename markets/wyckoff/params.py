"""Every threshold of the Wyckoff engine, named and tunable in one frozen dataclass.

Board awareness: price-band thresholds (spring depth, effort-vs-result band, limit tolerance) are
multiplied by a per-board factor (`board_scale`). Volume multiples and the SOS minimum move are NOT
scaled: WyckoffAgent's back-test notes found that doubling the SOS threshold on ±20 % boards made
results worse, so any further scaling should be back-tested first (research §4c).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from markets.symbols import Board, limit_pct


@dataclass(frozen=True, slots=True)
class WyckoffParams:
    # -- swings and the trading range --------------------------------------------------------------
    swing_window: int = 3  # a swing low/high is the extreme of the ±3 bars around it
    range_lookbacks: tuple[int, ...] = (40, 60, 90, 120, 180)  # candidate windows; the longest good one wins
    range_offsets: tuple[int, ...] = (
        0,
        5,
        10,
        20,
        30,
        45,
        60,
    )  # also look for a range that ended this many bars ago
    range_exclude_last: int = 1  # the newest bar is judged against the range before it
    range_pivots: int = 5  # support/resistance = median of the last 5 swing lows/highs
    range_min_width: float = 0.04  # (resistance - support) / support
    range_max_width: float = 0.45
    range_max_drift: float = 0.18  # |last close - first close| / first close inside the window
    range_min_containment: float = 0.80  # share of closes inside the band
    touch_tol: float = 0.035  # a bar touches a level when within 3.5 %
    min_touches: int = 2  # per side, counted as separate visits
    range_escape_bars: int = 3  # walking back, the range starts after 3 closes in a row outside the band
    quality_tie: float = 0.10  # a longer window wins unless its quality is this much lower
    # -- climaxes, AR, ST ------------------------------------------------------------------------
    vol_avg: int = 20  # volume multiples are against the 20-bar average before the bar
    climax_vol: float = 2.0
    climax_spread_atr: float = 1.5  # bar range ≥ 1.5 ATR
    climax_new_extreme: int = 40  # an SC makes the lowest low of 40 bars (a BC the highest high)
    trend_lookback: int = 40  # prior trend measured over 40 bars
    trend_min_move: float = 0.10  # ≥ 10 % decline (advance) before an SC (BC)
    ar_window: int = 15  # the AR is the extreme within 15 bars after the climax
    ar_min_atr: float = 1.5  # and travels at least 1.5 ATR
    st_tol_atr: float = 1.0  # an ST comes within 1 ATR of the climax extreme
    st_vol_ratio: float = 0.8  # on at most 0.8 × the climax volume
    st_max_beyond: float = (
        0.01  # and not more than 1 % beyond the climax extreme (over a BC high / under an SC low)
    )
    # -- Spring / upthrust -----------------------------------------------------------------------
    pierce: float = 0.005  # the low must go 0.5 % under support (the high 0.5 % over resistance)
    spring_max_depth: float = (
        0.08  # deeper than 8 % under support is a breakdown, not a spring (board-scaled)
    )
    spring_max_close_pos: float = 0.25  # spring close below mid + 0.25 × width
    spring_low_vol: float = 0.8  # ≤ 0.8 × avg volume: low-volume spring ("no supply")
    shakeout_vol: float = 1.3  # ≥ 1.3 × avg volume: shakeout, needs a low-volume test
    test_window: int = 10  # bars after a spring in which its test may come
    test_vol_ratio: float = 0.7  # test volume ≤ 0.7 × the spring's (and ≤ the average)
    test_max_undercut: float = 0.01  # the test may undercut the spring low by at most 1 %
    upthrust_shadow: float = 0.35  # upper shadow ≥ 35 % of the bar's range
    # -- SOS / SOW / LPS -------------------------------------------------------------------------
    sos_min_pct: float = 0.04  # close-to-close move (not board-scaled, see module doc)
    sos_vol: float = 1.5
    sos_max_prev_above: float = 0.02  # the bar before closed at most 2 % over resistance: a fresh break
    lps_window: int = 20
    lps_tol: float = 0.03  # an LPS holds within 3 % of the broken resistance
    lps_vol: float = 0.7  # on ≤ 0.7 × the SOS volume (and ≤ the average)
    lps_in_range_pos: float = 0.35  # in-range LPS after a spring: low ≤ support + 0.35 × width
    # -- effort vs result ------------------------------------------------------------------------
    evr_vol: float = 1.8
    evr_band: float = 0.02  # |move| ≤ 2 % on main boards (board-scaled)
    evr_recent: int = 60  # report EvR bars of the last 60 bars only
    # -- boards ----------------------------------------------------------------------------------
    board_scale: dict[str, float] = field(
        default_factory=lambda: {
            "main": 1.0,
            "chinext": 1.6,
            "star": 1.6,
            "bj": 2.0,
            "st": 0.5,
            "crypto": 1.5,
            "index": 0.8,
        }
    )
    limit_tol: float = 0.003  # a close within 0.3 % of the limit counts as at the limit (qfq rounding)
    # -- trend and health ------------------------------------------------------------------------
    ma_fast: int = 20
    ma_mid: int = 50
    ma_slow: int = 200
    ma_slope_bars: int = 5
    stop_pct: float = 0.07  # hard stop 7 % under cost
    stop_warn: float = 0.03  # warn within 3 % of a stop
    trail_after: float = 0.15  # trailing stop once the gain passes 15 %
    trail_pct: float = 0.10  # 10 % under the highest close since entry
    crash_10d: float = -0.15
    breakout_extend: float = 0.10  # 10 % over resistance (or 20 bars after the SOS): Phase E

    def scale(self, board: Board | str, is_st: bool = False) -> float:
        return self.board_scale.get("st" if is_st else board, 1.0)

    def for_board(self, board: Board | str, is_st: bool = False) -> WyckoffParams:
        """Params with the price-band thresholds scaled for a board."""
        k = self.scale(board, is_st)
        return replace(self, spring_max_depth=self.spring_max_depth * k, evr_band=self.evr_band * k)

    @staticmethod
    def limit(board: Board | str, is_st: bool = False) -> float | None:
        return limit_pct(board, is_st)  # type: ignore[arg-type]


DEFAULT_PARAMS = WyckoffParams()
