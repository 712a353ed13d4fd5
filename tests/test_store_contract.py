"""The invariants of the store contract (issue 20), run on each of our four backends: the
conformance kit's `StoreInvariantConformance` (`langchain_rolling_memory.testing`), one thin
subclass per backend.

Erase generations, a summary or fact write planned before an erase refused after it, ownership
checked in the statement that returns the rows, scores per scope: each enforced in the atomic
step that reads or writes the rows. The races these guard against are in `test_store_races.py`.
"""

from __future__ import annotations

from conftest import OurBackend

from langchain_rolling_memory.testing import StoreInvariantConformance


class TestMemory(OurBackend, StoreInvariantConformance):
    kind = "memory"


class TestSQLite(OurBackend, StoreInvariantConformance):
    kind = "sqlite"


class TestPostgres(OurBackend, StoreInvariantConformance):
    kind = "postgres"


class TestRedis(OurBackend, StoreInvariantConformance):
    kind = "redis"
