"""The public store API, run on each of our four backends: the conformance kit's
`StoreApiConformance` (`langchain_rolling_memory.testing`), one thin subclass per backend.

The checks themselves live in the kit, so a backend written outside this package runs the same
ones; `OurBackend` (conftest) gives each test an empty store and the raw views of `store_kit`.
"""

from __future__ import annotations

from conftest import OurBackend

from langchain_rolling_memory.testing import StoreApiConformance


class TestMemory(OurBackend, StoreApiConformance):
    kind = "memory"


class TestSQLite(OurBackend, StoreApiConformance):
    kind = "sqlite"


class TestPostgres(OurBackend, StoreApiConformance):
    kind = "postgres"


class TestRedis(OurBackend, StoreApiConformance):
    kind = "redis"
