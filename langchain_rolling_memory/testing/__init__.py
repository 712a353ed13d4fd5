"""A conformance kit for storage backends: the store contract as pytest classes to subclass.

Every backend of this package runs it; a backend of yours (a `SyncBackend` subclass, see
`stores/contract.py`) runs it the same way, in your own tests, by subclassing
`RollingStoreConformance` and giving it a `store` fixture that yields an EMPTY store on your
backend (its own file, table prefix or key prefix)::

    import pytest
    from langchain_rolling_memory.stores import RollingStore
    from langchain_rolling_memory.testing import RollingStoreConformance

    class TestMyStore(RollingStoreConformance):
        @pytest.fixture
        def store(self, tmp_path):
            with RollingStore(MyBackend(tmp_path / "data")) as store:
                yield store

        def raw_contents(self, store):  # optional: lets the kit check what erases leave
            return sorted(f"{row}" for row in store.backend.dump_rows())

Optional hooks, each skipping the checks that need it (with the reason) when not defined:
`raw_contents` (every row or key the backend holds, one line each), `reopen` (a new store
object on the same data) and `set_schema_version`. The checks also set the store's clock
through its `_now` method and call the backend's `search` primitive directly
(`store.backend`, `store.async_backend`).

Needs pytest and pytest-asyncio (the async checks carry ``@pytest.mark.asyncio``): install
``langchain-rolling-memory[testing]``. The library never imports this package.
"""

from langchain_rolling_memory.errors import require

require("pytest", "testing", feature="langchain_rolling_memory.testing (the backend conformance kit)")
require("pytest_asyncio", "testing", feature="langchain_rolling_memory.testing (the backend conformance kit)")

from langchain_rolling_memory.testing._clients import (  # noqa: E402 - after the extra is checked
    AsyncTwinChecks,
    ErasureAndExportChecks,
    FactChecks,
    IdChecks,
    ReopeningChecks,
)
from langchain_rolling_memory.testing._harness import FIDELITY, StoreHarness  # noqa: E402
from langchain_rolling_memory.testing._invariants import (  # noqa: E402
    GenerationChecks,
    InstallChecks,
    OwnershipChecks,
    PlannedFactChecks,
    RewindChecks,
    ScopeScoreChecks,
    StateUpdateChecks,
    TurnReadChecks,
)
from langchain_rolling_memory.testing._transcripts import (  # noqa: E402
    LeaseChecks,
    LeasedInstallChecks,
    SessionChecks,
    SummaryChecks,
    TranscriptChecks,
)

__all__ = [
    "FIDELITY",
    "RollingStoreConformance",
    "StoreApiConformance",
    "StoreHarness",
    "StoreInvariantConformance",
]


class StoreApiConformance(
    TranscriptChecks,
    SummaryChecks,
    LeaseChecks,
    LeasedInstallChecks,
    SessionChecks,
    FactChecks,
    ErasureAndExportChecks,
    IdChecks,
    ReopeningChecks,
    AsyncTwinChecks,
):
    """The public store API, method by method, sync and async (`stores/api.py`)."""


class StoreInvariantConformance(
    GenerationChecks,
    InstallChecks,
    PlannedFactChecks,
    StateUpdateChecks,
    OwnershipChecks,
    ScopeScoreChecks,
    TurnReadChecks,
    RewindChecks,
):
    """The invariants every backend enforces in the atomic step that reads or writes the rows:
    erase generations, the state compared before a write, ownership, scores per scope
    (`stores/contract.py`)."""


class RollingStoreConformance(StoreApiConformance, StoreInvariantConformance):
    """The whole kit: subclass it, define the `store` fixture (an empty store), and run pytest."""
