"""What a tool is called in a Chinese chat's progress lines: a short label instead of the function
name the model calls (`analyze_stock` → "分析个股"). English chats keep the function names, which
read as English and match the cards' and /rules' wording."""

from __future__ import annotations

# tool name -> (English, Chinese)
LABELS: dict[str, tuple[str, str]] = {
    "analyze_stock": ("Analyzing the stock", "分析个股"),
    "wyckoff_diagnose": ("Wyckoff diagnosis", "威科夫诊断"),
    "intraday_analysis": ("Intraday analysis", "盘中分析"),
    "intraday_rescue_check": ("Intraday rescue check", "盘中补救检查"),
    "query_tail_buy": ("Tail-buy query", "尾盘买入查询"),
    "market_regime": ("Market regime", "市场状态"),
    "get_market_overview": ("Market overview", "市场概览"),
    "get_market_price": ("Price", "查询价格"),
    "get_market_history": ("Price history", "历史行情"),
    "screen_stocks": ("Screening the market", "筛选股票"),
    "run_backtest": ("Backtest", "回测"),
    "generate_ai_report": ("Writing the report", "撰写报告"),
    "generate_strategy_decision": ("Strategy decision", "策略决策"),
    "execute_trade": ("Placing the order", "下单"),
    "cancel_order": ("Cancelling the order", "撤单"),
    "get_balance": ("Cash balance", "查询资金"),
    "get_positions": ("Positions", "查询持仓"),
    "get_trade_history": ("Trade history", "成交记录"),
    "portfolio": ("Portfolio", "投资组合"),
    "update_portfolio": ("Updating the portfolio", "更新持仓"),
    "get_strategies": ("Strategies", "查询策略"),
    "manage_strategy": ("Managing a strategy", "管理策略"),
    "manage_trader": ("Managing a trader", "管理自动交易"),
    "manage_schedule": ("Managing a schedule", "管理定时任务"),
    "list_schedules": ("Schedules", "查询定时任务"),
    "check_background_tasks": ("Background tasks", "查看后台任务"),
    "run_background_call": ("Starting a background task", "启动后台任务"),
    "delegate": ("Asking a helper", "交给助手"),
    "delegate_to_analysis": ("Asking the analysis helper", "交给分析助手"),
    "delegate_to_research": ("Asking the research helper", "交给研究助手"),
    "delegate_to_trading": ("Asking the trading helper", "交给交易助手"),
    "web_fetch": ("Reading a web page", "读取网页"),
    "fetch": ("Reading a web page", "读取网页"),
    "exec_command": ("Running a command", "运行命令"),
    "read_file": ("Reading a file", "读取文件"),
    "write_file": ("Writing a file", "写入文件"),
    "update_plan": ("Updating the plan", "更新计划"),
    "ask_user": ("Asking you", "向你提问"),
}


def tool_label(lang: str, name: str) -> str:
    """The label in a Chinese chat; elsewhere, and for a tool without one (an MCP server's), the
    name."""
    pair = LABELS.get(name)
    if pair is None or lang != "zh":
        return name
    return pair[1]
