"""Tool registration and execution."""

from agent.tools.registry import (
    Attachment,
    Deps,
    Tool,
    ToolContext,
    ToolOutput,
    Toolset,
    ToolSpec,
    build_tool,
    render_result,
)

__all__ = [
    "Attachment",
    "Deps",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "ToolSpec",
    "Toolset",
    "build_tool",
    "render_result",
]
