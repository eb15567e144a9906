from agent.messages import Message, ToolCallPart
from agent.references import current_references, render_references


def test_newest_reference_of_each_kind_wins():
    msgs = [
        Message.user("analyze 000001"),
        Message.tool_result("c1", "analyze_stock", '{"phase": "B", "refs": {"stock": "000001.SZ"}}'),
        Message.user("now 600519 please"),
        Message.assistant(
            tool_calls=[ToolCallPart(id="c2", name="read_file", arguments={"path": "notes/plan.md"})]
        ),
        Message.tool_result("c3", "manage_strategy", '{"refs": {"strategy": 7}}'),
    ]
    refs = current_references(msgs)
    assert refs == {"strategy": "7", "file": "notes/plan.md", "stock": "600519"}
    assert "stock=600519" in render_references(refs)


def test_tool_result_reference_beats_older_user_mention():
    msgs = [
        Message.user("look at sh600036"),
        Message.tool_result("c", "analyze_stock", '{"refs": {"stock": "300750.SZ"}}'),
    ]
    assert current_references(msgs)["stock"] == "300750.SZ"


def test_nothing_referenced():
    assert current_references([Message.user("hello")]) == {}
    assert render_references({}) == ""
