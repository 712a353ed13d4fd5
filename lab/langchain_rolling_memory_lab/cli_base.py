"""What every `rolling-memory` command starts from: the store, the provider models, the console.

Owns where the store lives and how a command opens it (an error names where the URL came
from), the chat model and summarizer of a real provider (a clear error if its key or extra is
missing), the rich console and the renderers. It holds no command and parses no arguments
(those are `cli_runs`, `cli_data` and `cli`), so every command module can import it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from langchain_rolling_memory.errors import (
    ConfigurationError,
    MissingCredentialsError,
    StoreError,
    require,
)
from langchain_rolling_memory.stores import RollingStore, open_store

STORE_ENV = "ROLLING_MEMORY_STORE"
HOME_ENV = "ROLLING_MEMORY_HOME"

# provider -> (module, extra, key variables, default model)
MODEL_PROVIDERS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "openai": ("langchain_openai", "openai", ("OPENAI_API_KEY",), "gpt-4o-mini"),
    "gemini": ("langchain_google_genai", "google", ("GOOGLE_API_KEY", "GEMINI_API_KEY"), "gemini-2.5-flash"),
}


def default_store_url() -> str:
    """The store URL used when ``--store`` is not given, first found as `cli`'s docstring (the
    ``--help`` text) lists: ``$ROLLING_MEMORY_STORE``, then ``memory.db`` in
    ``$ROLLING_MEMORY_HOME``, ``$XDG_DATA_HOME/rolling-memory`` or ``~/.local/share/rolling-memory``.
    """
    url = os.environ.get(STORE_ENV)
    if url:
        return url
    home = os.environ.get(HOME_ENV)
    if home:
        folder = Path(home).expanduser()
    else:
        data = os.environ.get("XDG_DATA_HOME") or (
            os.environ.get("LOCALAPPDATA") if os.name == "nt" else None
        )
        folder = (Path(data) if data else Path.home() / ".local" / "share") / "rolling-memory"
    return f"sqlite:///{(folder / 'memory.db').resolve().as_posix()}"


def provider_models(name: str) -> tuple[Any, Any]:
    """``(chat model, summarizer)`` of a real provider; a clear error if its key or extra is missing.

    The model is ``$ROLLING_MEMORY_MODEL`` (default ``gpt-4o-mini`` / ``gemini-2.5-flash``);
    ``$ROLLING_MEMORY_BASE_URL`` points both at another endpoint (a proxy, a local server).
    """
    module, extra, keys, default = MODEL_PROVIDERS[name]
    if not any(os.environ.get(k) for k in keys):
        msg = (
            f"--provider {name} needs {' or '.join(keys)} in the environment; set it, "
            "or leave out --provider to run offline with no key"
        )
        raise MissingCredentialsError(msg)
    require(module, extra, feature=f"--provider {name}")
    model_name = os.environ.get("ROLLING_MEMORY_MODEL", default)
    options: dict[str, Any] = {}
    if os.environ.get("ROLLING_MEMORY_BASE_URL"):
        options["base_url"] = os.environ["ROLLING_MEMORY_BASE_URL"]
    if name == "openai":
        from langchain_openai import ChatOpenAI

        from langchain_rolling_memory.summarizers import openai_summarizer

        return ChatOpenAI(model=model_name, **options), openai_summarizer(model_name, **options)
    from langchain_google_genai import ChatGoogleGenerativeAI

    from langchain_rolling_memory.summarizers import gemini_summarizer

    return ChatGoogleGenerativeAI(model=model_name, **options), gemini_summarizer(model_name, **options)


def new_console(stderr: bool = False) -> Any:
    """A rich console on stdout (or stderr), 120 columns wide unless a terminal or $COLUMNS says."""
    require("rich", "cli", feature="the rolling-memory command")
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    wide = stream.isatty() or "COLUMNS" in os.environ
    return Console(file=stream, width=None if wide else 120, highlight=False)


def shown_url(url: str) -> str:
    """The URL with the home folder written ``~``, as people type it."""
    home = Path.home().as_posix()
    return url.replace(home, "~", 1) if home != "/" else url


def renderers() -> Any:
    """The rich renderers, once rich is known to be installed."""
    require("rich", "cli", feature="the rolling-memory command")
    from langchain_rolling_memory_lab import cli_render

    return cli_render


def open_from_args(args: argparse.Namespace) -> RollingStore:
    """The store of ``--store`` (or its default); an error names where the URL came from."""
    try:
        return open_store(args.store or default_store_url())
    except (StoreError, ConfigurationError) as exc:
        where = (
            "--store" if args.store else f"${STORE_ENV}" if os.environ.get(STORE_ENV) else "the default store"
        )
        raise type(exc)(f"{where}: {exc}") from None
