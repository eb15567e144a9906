"""What a tool is called in a Chinese chat's progress lines: a short label instead of the function
name the model calls (`analyze_stock` → "分析个股"). English chats keep the function names, which
read as English and match the cards' and /rules' wording."""

from __future__ import annotations

from agent.texts import Text

LABELS: dict[str, Text] = {
    "analyze_stock": Text(en="Analyzing the stock", zh="分析个股"),
    "wyckoff_diagnose": Text(en="Wyckoff diagnosis", zh="威科夫诊断"),
    "intraday_analysis": Text(en="Intraday analysis", zh="盘中分析"),
    "intraday_rescue_check": Text(en="Intraday rescue check", zh="盘中补救检查"),
    "query_tail_buy": Text(en="Tail-buy query", zh="尾盘买入查询"),
    "market_regime": Text(en="Market regime", zh="市场状态"),
    "get_market_overview": Text(en="Market overview", zh="市场概览"),
    "get_market_price": Text(en="Price", zh="查询价格"),
    "get_market_history": Text(en="Price history", zh="历史行情"),
    "screen_stocks": Text(en="Screening the market", zh="筛选股票"),
    "run_backtest": Text(en="Backtest", zh="回测"),
    "generate_ai_report": Text(en="Writing the report", zh="撰写报告"),
    "generate_strategy_decision": Text(en="Strategy decision", zh="策略决策"),
    "execute_trade": Text(en="Placing the order", zh="下单"),
    "cancel_order": Text(en="Cancelling the order", zh="撤单"),
    "get_balance": Text(en="Cash balance", zh="查询资金"),
    "get_positions": Text(en="Positions", zh="查询持仓"),
    "get_trade_history": Text(en="Trade history", zh="成交记录"),
    "portfolio": Text(en="Portfolio", zh="投资组合"),
    "update_portfolio": Text(en="Updating the portfolio", zh="更新持仓"),
    "get_strategies": Text(en="Strategies", zh="查询策略"),
    "manage_strategy": Text(en="Managing a strategy", zh="管理策略"),
    "manage_trader": Text(en="Managing a trader", zh="管理自动交易"),
    "manage_schedule": Text(en="Managing a schedule", zh="管理定时任务"),
    "list_schedules": Text(en="Schedules", zh="查询定时任务"),
    "check_background_tasks": Text(en="Background tasks", zh="查看后台任务"),
    "run_background_call": Text(en="Starting a background task", zh="启动后台任务"),
    "delegate": Text(en="Asking a helper", zh="交给助手"),
    "delegate_to_analysis": Text(en="Asking the analysis helper", zh="交给分析助手"),
    "delegate_to_research": Text(en="Asking the research helper", zh="交给研究助手"),
    "delegate_to_trading": Text(en="Asking the trading helper", zh="交给交易助手"),
    "web_fetch": Text(en="Reading a web page", zh="读取网页"),
    "fetch": Text(en="Reading a web page", zh="读取网页"),
    "exec_command": Text(en="Running a command", zh="运行命令"),
    "read_file": Text(en="Reading a file", zh="读取文件"),
    "write_file": Text(en="Writing a file", zh="写入文件"),
    "update_plan": Text(en="Updating the plan", zh="更新计划"),
    "ask_user": Text(en="Asking you", zh="向你提问"),
}


def tool_label(lang: str, name: str) -> str:
    """The label in a Chinese chat; elsewhere, and for a tool without one (an MCP server's), the
    name."""
    label = LABELS.get(name)
    if label is None or lang != "zh":
        return name
    return label.zh
