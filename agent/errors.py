"""The exception tree. Each class says what the caller should do about it.

TapebotError
├── ConfigError                    fix the config; message names file, key and fix
├── ModelError                     a model call failed
│   ├── RetryableModelError        try the next model (429/5xx/529/connection/stall before output)
│   │   ├── RateLimited            carries retry_after
│   │   └── StreamStalled          no chunk within the idle timeout
│   ├── FatalModelError            never fall back (400/401/403, bad request)
│   └── StreamInterrupted          failed after output was produced: never replayed
├── ToolError                      becomes a tool result the model sees
│   ├── InvalidToolArguments       bad JSON / schema violation (never executed)
│   ├── ToolNotFound
│   ├── ToolDenied                 approval denied, policy refusal, no human present
│   ├── ToolTimedOut
│   └── ToolFailed                 the tool raised
│       └── ToolFailedInternally   on tapebot's database: a plain sentence; the details are logged
├── ApprovalError                  a decision that was refused; nothing was executed
│   ├── ApprovalNotFound           unknown or forged approval id (a stale or tampered button)
│   ├── NotAnApprover              the person tapping may not decide this approval
│   ├── ApprovalAlreadyDecided     approved/denied before: a second tap changes nothing
│   ├── ApprovalExpired            past its expiry (now or earlier): the card closes, nothing runs
│   ├── AlwaysNotOffered           "always allow" asked for an action that never offers it
│   └── ApprovalForeignChat        the approval belongs to another chat
├── StorageError                   the database refused (locked beyond the busy timeout, ...)
├── CompactionFailed               /compact could not summarise
├── NoticeDeferred                 no chat here serves a task's notice: it stays pending
└── LinkError                      linking identities was refused; nothing changed
    ├── LinkCodeInvalid            no such code (wrong, used, or replaced by a newer one)
    ├── LinkCodeExpired            the code was right but its time ran out
    ├── LinkRateLimited            too many wrong codes lately: wait before trying again
    ├── LinkNotAllowed             this pair cannot be linked (a group, itself, another account)
    └── NotLinked                  /unlink from an identity that is not linked
"""

from __future__ import annotations

# `config` sits below `agent`, so the root and ConfigError live in config.errors; re-exported here.
from config.errors import ConfigError as ConfigError
from config.errors import TapebotError as TapebotError


class ModelError(TapebotError):
    def __init__(self, message: str, *, model: str = "", status: int | None = None):
        self.model, self.status = model, status
        super().__init__(message)


class RetryableModelError(ModelError):
    pass


class RateLimited(RetryableModelError):
    def __init__(
        self, message: str, *, model: str = "", status: int | None = 429, retry_after: float | None = None
    ):
        super().__init__(message, model=model, status=status)
        self.retry_after = retry_after


class StreamStalled(RetryableModelError):
    pass


class FatalModelError(ModelError):
    pass


class StreamInterrupted(ModelError):
    """The stream broke after text or tool calls were already delivered; replaying would duplicate them."""


class ToolError(TapebotError):
    code = "tool_error"


class InvalidToolArguments(ToolError):
    code = "invalid_arguments"


class ToolNotFound(ToolError):
    code = "tool_not_found"


class ToolDenied(ToolError):
    code = "denied"


class ToolTimedOut(ToolError):
    code = "timed_out"


class ToolFailed(ToolError):
    code = "failed"


class ToolFailedInternally(ToolFailed):
    """A tool stopped on tapebot's own machinery (its database), not on anything the model or the
    user can change. Its message says so plainly; the driver's text, which quotes the SQL and its
    parameters, goes to the log only."""

    code = "internal"


# The drivers whose exceptions are storage failures, by the package that raises them: agent/ does
# not import the database libraries.
_STORAGE_PACKAGES = frozenset({"sqlalchemy", "asyncpg", "aiosqlite", "sqlite3", "psycopg", "psycopg2"})


def is_storage_failure(exc: BaseException) -> bool:
    if isinstance(exc, StorageError):
        return True
    return any(cls.__module__.split(".", 1)[0] in _STORAGE_PACKAGES for cls in type(exc).__mro__)


class ApprovalError(TapebotError):
    """A refused decision. Callers catch the subclass they act on; the message is for people."""


class ApprovalNotFound(ApprovalError):
    def __init__(self, message: str = "unknown or forged approval id"):
        super().__init__(message)


class NotAnApprover(ApprovalError):
    def __init__(self, message: str = "you are not allowed to decide this approval"):
        super().__init__(message)


class ApprovalAlreadyDecided(ApprovalError):
    def __init__(self, status: str = "decided"):
        super().__init__(f"this approval was already {status}")


class ApprovalExpired(ApprovalError):
    def __init__(self, message: str = "this approval expired; nothing was executed"):
        super().__init__(message)


class AlwaysNotOffered(ApprovalError):
    def __init__(self, message: str = "always allow is not offered for this action"):
        super().__init__(message)


class ApprovalForeignChat(ApprovalError):
    def __init__(self, message: str = "this approval belongs to another chat"):
        super().__init__(message)


class StorageError(TapebotError):
    pass


class TurnNotBegun(StorageError):
    """A new turn's first write failed: nothing of it is stored and nothing was yielded, so the
    caller may start the same request again once storage works."""


class CompactionFailed(TapebotError):
    """A compaction that was asked for (`/compact`) could not be done: the summary failed."""


class NoticeDeferred(TapebotError):
    """A finished task's notice addresses a chat this process does not serve (the console, a
    one-shot turn): its claim is released and it waits for the process that serves the chat."""


class LinkError(TapebotError):
    """Linking identities was refused; nothing changed."""


class LinkCodeInvalid(LinkError):
    """No such code: mistyped, already used, or replaced by a newer one."""


class LinkCodeExpired(LinkError):
    """The code matched but its time ran out: ask for a new one."""


class LinkRateLimited(LinkError):
    """Too many wrong codes from this identity lately."""

    def __init__(self, message: str = "", *, retry_after: float = 0.0):
        super().__init__(message)
        self.retry_after = retry_after


class LinkNotAllowed(LinkError):
    """This pair cannot be linked; `reason` says why ("group", "self", "other_account")."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class NotLinked(LinkError):
    """The identity is not linked to any other."""
