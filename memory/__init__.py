"""Storage: SQLAlchemy 2 (async) with Alembic migrations.

    memory.base     the one DeclarativeBase
    memory.db       create_engine (SQLite pragmas), upgrade() (migrations), Database
    memory.models   core tables (sessions, messages, turns, approvals, usage, ...)
    memory.stores   SqlStore: the agent's storage ports over those tables

Importing this package imports nothing heavy; import the submodule you need.
"""
