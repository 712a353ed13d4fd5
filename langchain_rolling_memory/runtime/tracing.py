"""How memory's own work shows in callbacks, LangSmith and streams: names, tags, nostream.

Owns the marks put on the summarizer's and the extractor's model calls (a run name, tags and
metadata saying what they are, as LangChain's `SummarizationMiddleware` marks its own), the
``nostream`` tag that keeps them out of what a chain or an agent streams as its answer, and the
retriever run a recall is traced as (`recall_run`). It makes no model call and no search
itself; that the background runs them in the caller's context (so their runs are children of
the chain that scheduled them) is `background`'s.

Logs of the whole package go to the logger named ``"langchain_rolling_memory"`` (`LOGGER_NAME`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForRetrieverRun,
    CallbackManager,
    CallbackManagerForRetrieverRun,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ensure_config, var_child_runnable_config

LOGGER_NAME = "langchain_rolling_memory"
"""The one logger every module of the package writes to."""

TAG_NOSTREAM = "nostream"
"""LangGraph's tag (``langgraph.constants.TAG_NOSTREAM``) for model calls whose tokens are not
streamed with ``stream_mode="messages"``; the same string here, so it needs no langgraph."""

TAG = "rolling_memory"
"""Tag of every model call made by the memory (summaries, fact extraction)."""

SUMMARIZE = "rolling_memory.summarize"
"""Run name of a summarizer's model call."""

EXTRACT_FACTS = "rolling_memory.extract_facts"
"""Run name of the fact extractor's model call."""

RECALL = "rolling_memory.recall"
"""Run name of a recall: a retriever run whose documents are the excerpts shown."""

_Input = TypeVar("_Input")
_Output = TypeVar("_Output")


def call_config(run_name: str) -> RunnableConfig:
    """The config of one of memory's model calls: its name, tags and metadata.

    Tagged ``nostream`` (a summary is never the answer a user streams) and ``rolling_memory``;
    the metadata's ``lc_source`` says it is the memory's, as ``"summarization"`` marks the calls
    of LangChain's own `SummarizationMiddleware`.
    """
    return {
        "run_name": run_name,
        "tags": [TAG_NOSTREAM, TAG],
        "metadata": {"lc_source": TAG, "rolling_memory_call": run_name.rpartition(".")[2]},
    }


def traced(model: Runnable[_Input, _Output], run_name: str) -> Runnable[_Input, _Output]:
    """`model` whose calls carry `call_config(run_name)`; callbacks and parents still come from
    the caller's run (the config's context), so the call is a child of the chain that made it."""
    return model.with_config(call_config(run_name))


@contextmanager
def unstreamed() -> Iterator[None]:
    """Inside: every model call (a summarizer's, an extractor's, one made by a summarizer
    function of the user's) carries the ``nostream`` tag.

    Model calls inherit the run config of the code around them through a context variable,
    and with it the stream handlers (``stream_mode="messages"``, ``astream_events``), which
    would show the summary as if the chain or agent said it. Tagged, they are still traced as
    child runs; LangGraph does not stream them, and an ``astream_events`` consumer filters them
    with ``exclude_tags=["nostream"]``. Background work started inside copies the tagged context.
    """
    current = var_child_runnable_config.get() or RunnableConfig()
    tags = list(current.get("tags") or [])
    if TAG_NOSTREAM not in tags:
        tags.append(TAG_NOSTREAM)
    token = var_child_runnable_config.set({**current, "tags": tags})
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


def _recall_settings() -> dict[str, object]:
    """What a recall run inherits from the run around it (the node's, the chain's config in
    the context variable): its callbacks, so it is a child of that run, tags and metadata."""
    config = ensure_config()
    return {
        "inheritable_callbacks": config.get("callbacks"),
        "inheritable_tags": config.get("tags"),
        "local_tags": [TAG],
        "inheritable_metadata": config.get("metadata"),
        "local_metadata": {"lc_source": TAG, "rolling_memory_call": "recall"},
    }


def recall_run(query: str) -> CallbackManagerForRetrieverRun:
    """Start the retriever run of one recall (`RECALL`), a child of the current run.

    The caller ends it with ``on_retriever_end(documents)`` or ``on_retriever_error(exc)``
    and passes ``run.get_child()`` as the callbacks of any retriever it calls inside, as
    `BaseRetriever.invoke` does for its own run.
    """
    manager = CallbackManager.configure(**_recall_settings())  # type: ignore[arg-type]
    return manager.on_retriever_start(None, query, name=RECALL)


async def arecall_run(query: str) -> AsyncCallbackManagerForRetrieverRun:
    """Async twin of `recall_run`."""
    manager = AsyncCallbackManager.configure(**_recall_settings())  # type: ignore[arg-type]
    return await manager.on_retriever_start(None, query, name=RECALL)
