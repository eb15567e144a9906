"""Storage: SQLAlchemy 2 (async) with Alembic migrations.

    memory.base     the one DeclarativeBase
    memory.db       create_engine (SQLite pragmas), upgrade() (migrations), Database
    memory.models   core tables (sessions, messages, turns, approvals, usage, ...)
    memory.session_store, turn_store, approval_store, usage_store, inbox_store, kv_store,
    memory.chat_tables   one store per storage port over those tables (memory.store_sql: shared)
    memory.stores   SqlStore: all of them in one object, for the composition root

Importing this package imports nothing heavy; import the submodule you need.
"""
