"""Named starting points for a rolling summary (support, consultation, tutorial, chat), with the
French lessons' names as aliases; pure data.

A preset is only a dict of `MemorySettings` keywords (`MemoryOptions`): `preset("support")` is
meant to be spread into `RollingSummaryChatMessageHistory(...)` (or `with_rolling_memory(...)`,
the agent middleware, `MemorySettings(...)`), and any setting can be overridden. It does not
choose a summarizer or a store; it names the built-in summary prompt that suits it
(`Preset.prompt`, for ``chat_model_summarizer(model, prompt=...)`` and the provider
constructors), which a setting cannot carry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

from langchain_rolling_memory.core.settings import MemoryOptions, check_options
from langchain_rolling_memory.core.topics import keyword_topic_shift
from langchain_rolling_memory.core.trigger_keep import HALF, KeepLast
from langchain_rolling_memory.errors import ConfigurationError


@dataclass(frozen=True)
class Preset:
    """History settings for one kind of conversation, and why.

    `prompt` names the built-in summary prompt for it (`prompts.PROMPT_KINDS`): give it to the
    summarizer, ``chat_model_summarizer(model, prompt=PRESETS["support"].prompt)``.
    """

    max_turns: int
    keep_last: KeepLast
    max_words: int
    topic_shifts: bool
    why: str
    prompt: str = "general"

    def settings(self) -> MemoryOptions:
        return {
            "max_turns": self.max_turns,
            "keep_last": self.keep_last,
            "max_words": self.max_words,
            "topic_detector": keyword_topic_shift() if self.topic_shifts else None,
        }


_WHY = {
    "support": (
        "short exchanges, several requests per session: fold early, one section per request; "
        "the summary keeps every product, reference and quantity"
    ),
    "consultation": "long answers that build on each other: keep more verbatim, a longer summary",
    "tutorial": "step by step: only the current step matters verbatim, the steps done are summarized",
    "chat": "open conversation: a balanced window and summary",
    "summary_memory": "the summary-memory lesson's rule: when the buffer is full, fold its oldest half",
}

PRESETS: dict[str, Preset] = {
    name: Preset(max_turns, keep_last, max_words, topic_shifts, _WHY[name], prompt)
    for name, max_turns, keep_last, max_words, topic_shifts, prompt in (
        ("support", 6, 2, 100, True, "support"),
        ("consultation", 10, 4, 200, True, "general"),
        ("tutorial", 4, 2, 150, False, "general"),
        ("chat", 8, 4, 120, False, "general"),
        ("summary_memory", 10, HALF, 120, False, "general"),
    )
}
"""The built-in presets; read ``PRESETS[name].why`` for the reasoning."""

PRESET_ALIASES: dict[str, str] = {
    "support_client": "support",
    "consultation": "consultation",
    "tutoriel": "tutorial",
    "conversation_libre": "chat",
    "memoire_resumee": "summary_memory",
}
"""The preset names of the French lessons, each the same settings as a built-in preset."""


def _chosen(name: str) -> Preset:
    try:
        return PRESETS[PRESET_ALIASES.get(name, name)]
    except KeyError:
        known = sorted({*PRESETS, *PRESET_ALIASES})
        msg = f"unknown preset {name!r}; choose one of {known}"
        raise ConfigurationError(msg) from None


def preset_prompt(name: str) -> str:
    """The built-in summary prompt of a named preset (an alias too), for the summarizer.

    Example:
        >>> preset_prompt("support_client")
        'support'
    """
    return _chosen(name).prompt


def preset(name: str, **overrides: Unpack[MemoryOptions]) -> MemoryOptions:
    """The settings of a named preset, with `overrides` (any `MemorySettings` field) applied,
    to spread into a history, a chain, the agent middleware or `MemorySettings`.

    | preset | folds after | keeps | summary words | topic sections | summary prompt |
    | --- | --- | --- | --- | --- | --- |
    | ``support`` | 6 messages | 2 | 100 | yes | ``support`` |
    | ``consultation`` | 10 | 4 | 200 | yes | ``general`` |
    | ``tutorial`` | 4 | 2 | 150 | no | ``general`` |
    | ``chat`` | 8 | 4 | 120 | no | ``general`` |
    | ``summary_memory`` | 10 | half (5) | 120 | no | ``general`` |

    The summary prompt is the summarizer's (`preset_prompt`): ``support`` also asks for every
    product, reference and quantity.

    The French lessons' names are aliases: ``support_client`` (``support``),
    ``consultation``, ``tutoriel`` (``tutorial``), ``conversation_libre`` (``chat``),
    ``memoire_resumee`` (``summary_memory``).
    They are starting points: measure with ``rolling-memory replay`` and adjust.

    Example:
        >>> settings = preset("support", keep_last=3)
        >>> settings["max_turns"], settings["keep_last"], settings["topic_detector"] is not None
        (6, 3, True)
    """
    check_options(overrides, owner="preset")
    return {**_chosen(name).settings(), **overrides}
