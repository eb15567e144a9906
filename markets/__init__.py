"""The investing toolkit: market data, the Wyckoff engine, screening, backtests, portfolio, paper
trading, charts, and the tools the model calls.

    markets.data.MarketData            resolve / search / bars / index_bars / panel / as_of / calendar
                                       / minute_bars (from its minute providers)
    markets.minute                     the minute-bar port: MinuteBars (VWAP), MinuteProvider;
                                       akshare's in markets.providers.akshare_minute
    markets.intraday                   the session read, tail-session check, rescue check
    markets.regime.market_regime       risk-on / neutral / risk-off from the index and breadth
    markets.providers                  BundledProvider, CsvFolderProvider; network: AkshareProvider,
                                       YFinanceProvider, CcxtProvider (extras, lazily imported)
    markets.bars.Bars                  canonical daily bars (numpy columns, volume in shares)
    markets.calendar.TradingCalendar   is_trading_day / next_trading_day / prev_trading_day
    markets.wyckoff.analyze            range, events, phase + evidence, health
    markets.screen.screen              whole-market funnel
    markets.backtest.run               daily backtester with A-share / crypto rules
    markets.portfolio.Portfolio        holdings, cash, history per user (database)
    markets.broker.PaperBroker         idempotent paper fills; orders blocked at a price limit wait
                                       (retry_waiting / cancel); LiveCcxtBroker behind live = true
    markets.strategies                 StrategyConfig, StrategyStore, run_trader_once
    markets.charts                     candles(), equity_curve() → PNG path
    markets.services.MarketServices    what the tools need (ctx.deps.get(MarketServices))
    markets.tools.market_tools         the Toolset registered with the runtime (with the intraday,
                                       regime and diagnosis tools of markets.tools_intraday)
    markets.snapshots                  DynamicSnapshots / CurrentReferences helpers
"""
