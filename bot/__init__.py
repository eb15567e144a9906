"""The chat front door. A message's path, from the platform to the model and back:

1. an adapter (adapters/telegram.py, discord.py, console.py for `tapebot chat`) turns the
   platform's update (or a typed line) into an `Inbound`;
2. the router (bot/gateway.py) checks access (bot/access.py), records the update once — its
   storage retried while it fails (bot/retry.py) — and finds the chat's state (bot/chats.py);
3. a button, or a reply to the card or question the chat waits on, goes to bot/waiting.py and is
   read by agent/consent.read_consent (approvals) or bot/replies.py (questions); a command goes to
   its handler in bot/commands/ (one `CommandSpec` per command, which also makes the menus and
   /help), called with a narrow `CommandContext` built in one place (bot/commands/binding.py);
4. any other message goes to the chat's lane (bot/lanes.py), which runs one turn at a time:
   agent/runtime.py's events, shown by bot/delivery.py (task notices, briefs, skills and resumed
   turns queue in the same lane);
5. after a restart bot/recovery.py takes up what was left; bot/app.py builds all of this.

The parts of steps 3–5 reach the chats through one `ChatOutput` (bot/chat_output.py), not through
the router. A scheduled brief: scheduler → `BriefRunner` → `ChatBriefs` (bot/briefs.py) → the lane.
"""
