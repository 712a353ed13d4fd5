"""The exceptions this package raises; nothing else lives here.

Every exception subclasses the builtin a caller would already catch::

    RollingMemoryError                      base of everything raised on purpose
    ├── InvalidIdError(ValueError)          a client_id or session_id that is not allowed
    ├── ConfigurationError(ValueError)      bad settings, given when something is built (limits, URLs, prompts)
    ├── InvalidArgumentError(ValueError)    a call's argument or input it cannot take (a negative limit,
    │                                       state that is not JSON, a chain input holding no messages)
    ├── FactError(ValueError)               a fact refused: too long, too many, filtered, odd bytes
    ├── InvalidTextError(ValueError)        text no backend can store exactly (lone surrogate, NUL)
    ├── ConversationFormatError(ValueError) a conversation file that cannot be read (line given)
    ├── OwnershipError(PermissionError)     a session used with a client that does not own it
    ├── MissingExtraError(ImportError)      an optional dependency is not installed
    ├── MissingCredentialsError(RuntimeError)  a provider key is not set
    ├── SummarizerError(RuntimeError)       the summarizer failed or returned nothing usable
    └── StoreError(RuntimeError)            a backend could not do what was asked
        ├── SchemaVersionError              the store was written by a newer version
        └── StaleWriteError                 a write planned from a read that an erase overtook
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "ConversationFormatError",
    "FactError",
    "InvalidArgumentError",
    "InvalidIdError",
    "InvalidTextError",
    "MissingCredentialsError",
    "MissingExtraError",
    "OwnershipError",
    "RollingMemoryError",
    "SchemaVersionError",
    "StaleWriteError",
    "StoreError",
    "SummarizerError",
]


class RollingMemoryError(Exception):
    """Base class of every exception this package raises on purpose."""


class InvalidIdError(RollingMemoryError, ValueError):
    """A `client_id` or `session_id` is empty, too long or has forbidden characters."""


class ConfigurationError(RollingMemoryError, ValueError):
    """A setting is out of range or inconsistent with another one."""


class InvalidArgumentError(RollingMemoryError, ValueError):
    """A call was given an argument or input it cannot take; nothing was written.

    The setting of an object being built is a `ConfigurationError`; an id, an
    `InvalidIdError`; text no backend can store, an `InvalidTextError`; a fact, a `FactError`.
    """


class FactError(RollingMemoryError, ValueError):
    """A fact was refused before it was stored (length, count, filter)."""


class InvalidTextError(RollingMemoryError, ValueError):
    """A message, state, summary or argument holds characters that cannot be stored exactly."""


class ConversationFormatError(RollingMemoryError, ValueError):
    """A conversation file (JSONL, JSON, LoCoMo) has a line or item that cannot be read."""


class OwnershipError(RollingMemoryError, PermissionError):
    """A session was used with a `client_id` other than the one that owns it."""

    @classmethod
    def for_session(cls, session_id: str, client_id: str | None) -> OwnershipError:
        """The one message every backend and adapter raises for a session owned by another
        client (`client_id` None: by a client, reached by a call that named none)."""
        if client_id is None:
            msg = (
                f"session {session_id!r} belongs to another client, and no client_id was named; "
                "an owned session is reachable only by naming its client: pass its client_id, "
                "or use another session_id"
            )
        else:
            msg = (
                f"session {session_id!r} belongs to another client than {client_id!r}; "
                "use a session_id of this client"
            )
        return cls(msg)


class MissingExtraError(RollingMemoryError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


class MissingCredentialsError(RollingMemoryError, RuntimeError):
    """A provider key is not set; the message names the environment variable."""


class SummarizerError(RollingMemoryError, RuntimeError):
    """The summarizer raised, timed out or returned nothing usable."""


class StoreError(RollingMemoryError, RuntimeError):
    """A backend could not complete an operation."""


class SchemaVersionError(StoreError):
    """The store was created by a newer version of this package."""


class StaleWriteError(StoreError):
    """A write planned from an earlier read was refused: the session it was read from was
    erased (or erased and re-created) since, so writing would bring erased data back."""

    @classmethod
    def for_session(cls, session_id: str, what: str) -> StaleWriteError:
        msg = (
            f"{what} refused: session {session_id!r} was erased or re-created after it was read "
            "(its erase generation changed); nothing was written"
        )
        return cls(msg)


def require(module: str, extra: str, *, feature: str) -> None:
    """Raise `MissingExtraError` naming `extra` if `module` cannot be imported."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        msg = (
            f"{feature} needs the optional dependency {module!r}, which is not installed; "
            f"install it with: pip install 'langchain-rolling-memory[{extra}]'"
        )
        raise MissingExtraError(msg)
