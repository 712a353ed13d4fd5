"""ChatModelSummarizer on LangChain's fake chat models: validation retry, transient retries,
structured summaries, usage, and the provider constructors' errors."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import ModelAuthenticationError, ModelRateLimitError
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatResult

from langchain_rolling_memory import chat_model_summarizer, gemini_summarizer, openai_summarizer
from langchain_rolling_memory.errors import ConfigurationError, MissingCredentialsError, MissingExtraError
from langchain_rolling_memory.summarizers import (
    StructuredSummary,
    is_transient_error,
    parse_structured_summary,
    render_structured_summary,
)

FOLDED: list[BaseMessage] = [HumanMessage("I'm Ana, deliver on Saturdays please"), AIMessage("Noted, Ana.")]
# A reply of a realistic length: over the default 20-word minimum (lesson 2's validation).
SUMMARY = (
    "Ana, a client from Lyon, wants every order delivered on Saturdays only; "
    "the assistant noted it and will apply it to her next deliveries."
)


class RecordingModel(GenericFakeChatModel):
    """GenericFakeChatModel that remembers each request and can fail before answering."""

    requests: list[list[BaseMessage]] = []  # noqa: RUF012 - pydantic field, copied per instance
    failures: list[BaseException] = []  # noqa: RUF012

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        if self.failures:
            raise self.failures.pop(0)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _model(*replies: str | AIMessage, failures: list[BaseException] | None = None) -> RecordingModel:
    messages: Iterator[AIMessage] = iter(r if isinstance(r, AIMessage) else AIMessage(r) for r in replies)
    return RecordingModel(messages=messages, requests=[], failures=list(failures or []))


class Unavailable(Exception):
    status_code = 503


class Invalid(Exception):
    status_code = 400


# ---------------------------------------------------------------- validation retry


@pytest.mark.parametrize(
    "unusable",
    [
        pytest.param("", id="empty"),
        pytest.param("## Summary", id="title-only"),
        pytest.param("word " * 300, id="over-long"),
    ],
)
def test_unusable_reply_gets_one_stricter_retry(unusable: str) -> None:
    model = _model(unusable, "Ana wants Saturday deliveries.")
    result = chat_model_summarizer(model, max_words=50).summarize("", FOLDED)
    assert result.text == "Ana wants Saturday deliveries."
    assert result.calls == 2
    first_system, retry_system = model.requests[0][0].text, model.requests[1][0].text
    assert "previous answer was unusable" not in first_system
    assert "previous answer was unusable" in retry_system


def test_second_unusable_reply_returns_the_cleaned_best_effort() -> None:
    model = _model("word " * 300, "## Summary")
    result = chat_model_summarizer(model, max_words=20).summarize("", FOLDED)
    assert len(result.text.split()) <= 20
    assert result.text.startswith("word word")
    assert len(model.requests) == 2


def test_request_carries_previous_summary_and_folded_messages() -> None:
    model = _model(SUMMARY)
    chat_model_summarizer(model).summarize("Ana is a client.", FOLDED)
    request = model.requests[0]
    assert isinstance(request[0], SystemMessage)
    assert "Ana is a client." in request[1].text
    assert "User: I'm Ana, deliver on Saturdays please" in request[1].text
    assert "Assistant: Noted, Ana." in request[1].text


def test_french_prompt_and_word_cap_reach_the_model() -> None:
    model = _model(
        "Ana, cliente à Lyon, veut être livrée le samedi uniquement ; l'assistant l'a noté et l'appliquera à toutes ses prochaines livraisons."
    )
    chat_model_summarizer(model, language="fr", max_words=42).summarize("", FOLDED)
    system, request = model.requests[0]
    assert "Au plus 42 mots" in system.text
    assert "Utilisateur : I'm Ana" in request.text


# ---------------------------------------------------------------- too short (issue 15, lesson 2)


def test_a_reply_under_twenty_words_gets_the_one_strict_retry() -> None:
    # Lesson 2: "a summary under 20 words is retried once"; the retry is a model call.
    model = _model("Client mécontent.", SUMMARY)
    result = chat_model_summarizer(model).summarize("", FOLDED)
    assert result.text == SUMMARY
    assert result.calls == 2
    assert len(model.requests) == 2
    assert "too short" in model.requests[1][0].text


def test_a_second_short_reply_is_the_cleaned_best_effort() -> None:
    model = _model("Client mécontent.", "**Résumé :** Ana, samedi.")
    result = chat_model_summarizer(model, language="fr").summarize("", FOLDED)
    assert result.text == "Ana, samedi."
    assert result.calls == 2
    assert "trop courte" in model.requests[1][0].text


async def test_async_twin_retries_a_short_reply() -> None:
    model = _model("Ana, Saturdays.", SUMMARY)
    result = await chat_model_summarizer(model).asummarize("", FOLDED)
    assert (result.text, result.calls) == (SUMMARY, 2)


@pytest.mark.parametrize(
    ("options", "reply", "calls"),
    [
        pytest.param({"min_words": 0}, "Ana, Saturdays.", 1, id="zero-accepts-any-non-empty-reply"),
        pytest.param({"min_words": 3}, "Ana wants Saturdays.", 1, id="exactly-the-minimum"),
        pytest.param({"min_words": 4}, "Ana wants Saturdays.", 2, id="one-word-short"),
        pytest.param({"max_words": 3}, "Ana wants Saturdays.", 1, id="never-more-than-the-word-cap"),
    ],
)
def test_min_words_threshold(options: dict[str, Any], reply: str, calls: int) -> None:
    model = _model(reply, SUMMARY)
    result = chat_model_summarizer(model, **options).summarize("", FOLDED)
    assert result.calls == calls == len(model.requests)


def test_a_short_structured_answer_is_judged_by_its_fields_not_its_length() -> None:
    model = _model('{"topic": "Deliveries", "decisions": ["Saturdays"]}')
    result = chat_model_summarizer(model, structured=True).summarize("", FOLDED)
    assert (result.text, result.calls) == ("Topic: Deliveries.\nDecisions: Saturdays.", 1)


def test_negative_min_words_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"min_words must not be negative.*got min_words=-1"):
        chat_model_summarizer(_model("x"), min_words=-1)


# ---------------------------------------------------------------- transient errors


def test_transient_errors_are_retried_then_succeed() -> None:
    model = _model(SUMMARY, failures=[Unavailable("503"), TimeoutError("slow")])
    result = chat_model_summarizer(model, retries=2, backoff=0.0).summarize("", FOLDED)
    assert result.text == SUMMARY
    assert len(model.requests) == 3


def test_langchains_retryable_model_errors_are_retried_and_the_others_are_not() -> None:
    model = _model(SUMMARY, failures=[ModelRateLimitError("slow down")])
    assert chat_model_summarizer(model, retries=1, backoff=0.0).summarize("", FOLDED).text == SUMMARY
    assert len(model.requests) == 2
    model = _model(SUMMARY, failures=[ModelAuthenticationError("bad key")])
    with pytest.raises(ModelAuthenticationError):
        chat_model_summarizer(model, retries=3, backoff=0.0).summarize("", FOLDED)
    assert len(model.requests) == 1


def test_transient_errors_beyond_the_bound_are_raised() -> None:
    model = _model("never sent", failures=[Unavailable("a"), Unavailable("b"), Unavailable("c")])
    with pytest.raises(Unavailable):
        chat_model_summarizer(model, retries=2, backoff=0.0).summarize("", FOLDED)
    assert len(model.requests) == 3


def test_permanent_errors_are_not_retried() -> None:
    model = _model("never sent", failures=[Invalid("bad request")])
    with pytest.raises(Invalid):
        chat_model_summarizer(model, retries=5, backoff=0.0).summarize("", FOLDED)
    assert len(model.requests) == 1


async def test_async_transient_errors_are_retried() -> None:
    model = _model(SUMMARY, failures=[ConnectionError("reset")])
    result = await chat_model_summarizer(model, backoff=0.0).asummarize("", FOLDED)
    assert result.text == SUMMARY
    assert len(model.requests) == 2


def test_no_retries_means_one_request() -> None:
    model = _model(SUMMARY, failures=[Unavailable("503")])
    with pytest.raises(Unavailable):
        chat_model_summarizer(model, retries=0).summarize("", FOLDED)
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        pytest.param(Unavailable(), True, id="status-503"),
        pytest.param(Invalid(), False, id="status-400"),
        pytest.param(TimeoutError(), True, id="timeout"),
        pytest.param(ConnectionResetError(), True, id="connection"),
        pytest.param(ValueError("bad"), False, id="plain-error"),
        pytest.param(ModelRateLimitError(), True, id="langchain-rate-limit"),
        pytest.param(ModelAuthenticationError(), False, id="langchain-auth"),
    ],
)
def test_transient_error_classification(error: BaseException, transient: bool) -> None:
    assert is_transient_error(error) is transient


def test_transient_cause_makes_a_wrapper_transient() -> None:
    wrapper = RuntimeError("wrapped")
    wrapper.__cause__ = Unavailable()
    assert is_transient_error(wrapper)


@pytest.mark.parametrize("options", [{"retries": -1}, {"backoff": -1.0}, {"max_words": 0}])
def test_bad_settings_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        chat_model_summarizer(_model("x"), **options)


# ---------------------------------------------------------------- usage


def test_usage_comes_from_usage_metadata_and_adds_up_over_the_retry() -> None:
    first = AIMessage("", usage_metadata={"input_tokens": 100, "output_tokens": 0, "total_tokens": 100})
    second = AIMessage("Ana.", usage_metadata={"input_tokens": 120, "output_tokens": 3, "total_tokens": 123})
    result = chat_model_summarizer(_model(first, second)).summarize("", FOLDED)
    assert (result.input_tokens, result.output_tokens, result.calls) == (220, 3, 2)


def test_usage_is_counted_when_the_model_reports_none() -> None:
    result = chat_model_summarizer(_model(SUMMARY)).summarize("", FOLDED)
    assert result.input_tokens is not None
    assert result.input_tokens > 20
    assert result.output_tokens is not None
    assert result.output_tokens > 0


# ---------------------------------------------------------------- structured


def test_structured_summary_from_json_text_when_the_model_has_no_structured_output() -> None:
    answer = (
        '```json\n{"topic": "Deliveries", "user_preferences": ["Saturdays only"], '
        '"decisions": "Ship with DHL", "open_questions": [], "key_facts": ["Client Ana"]}\n```'
    )
    model = _model(answer)
    result = chat_model_summarizer(model, structured=True).summarize("", FOLDED)
    assert result.text == (
        "Topic: Deliveries.\nPreferences: Saturdays only.\nDecisions: Ship with DHL.\nFacts: Client Ana."
    )
    assert '"user_preferences"' in model.requests[0][0].text  # the prompt asked for JSON
    assert result.fields == {
        "topic": "Deliveries",
        "user_preferences": ["Saturdays only"],
        "decisions": ["Ship with DHL"],
        "open_questions": [],
        "key_facts": ["Client Ana"],
    }


def test_structured_reply_that_does_not_parse_is_used_as_plain_text() -> None:
    result = chat_model_summarizer(_model(SUMMARY), structured=True).summarize("", FOLDED)
    assert result.text == SUMMARY
    assert result.fields is None


def test_structured_labels_follow_the_language() -> None:
    answer = '{"topic": "Livraisons", "decisions": ["Envoi le samedi"], "open_questions": ["Quel tarif ?"]}'
    result = chat_model_summarizer(_model(answer), structured=True, language="fr").summarize("", FOLDED)
    assert (
        result.text == "Sujet : Livraisons.\nDécisions : Envoi le samedi.\nQuestions ouvertes : Quel tarif ?"
    )


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("no json here", id="text"),
        pytest.param("{not json}", id="broken-json"),
        pytest.param('{"topic": ""}', id="empty-object"),
        pytest.param('{"decisions": 3}', id="wrong-type"),
        pytest.param(["a list"], id="not-an-object"),
    ],
)
def test_unparseable_structured_answers_give_none(value: object) -> None:
    assert parse_structured_summary(value) is None


def test_structured_render_skips_empty_fields() -> None:
    summary = StructuredSummary(topic="Refund", open_questions=["When?"], key_facts=[" ", "Order 12"])
    assert render_structured_summary(summary) == "Topic: Refund.\nOpen questions: When?\nFacts: Order 12."


# ---------------------------------------------------------------- provider constructors


def test_openai_summarizer_passes_options_to_the_client() -> None:
    summarizer = openai_summarizer(
        "gpt-4.1-mini", api_key="sk-test", base_url="http://127.0.0.1:9/v1", temperature=0.1, max_words=80
    )
    model: Any = summarizer.model
    assert (model.model_name, model.temperature, model.openai_api_base) == (
        "gpt-4.1-mini",
        0.1,
        "http://127.0.0.1:9/v1",
    )
    assert (model.max_retries, summarizer.retries) == (2, 0)  # the SDK retries, we do not
    assert summarizer.max_words == 80
    assert summarizer.min_words == 20  # lesson 2's validation, on by default
    assert openai_summarizer(api_key="sk-test", min_words=5).min_words == 5


def test_gemini_summarizer_passes_options_to_the_client() -> None:
    summarizer = gemini_summarizer(
        "gemini-2.5-flash-lite", api_key="k", base_url="http://127.0.0.1:9", language="fr"
    )
    model: Any = summarizer.model
    assert (model.model, model.base_url, model.max_retries) == (
        "gemini-2.5-flash-lite",
        "http://127.0.0.1:9",
        3,  # attempts: the first and two retries, by the Google client
    )
    assert summarizer.retries == 0
    assert "Tu tiens le résumé" in summarizer.prompt.system
    assert summarizer.min_words == 20
    assert gemini_summarizer(api_key="k", min_words=0).min_words == 0


@pytest.mark.parametrize(
    ("factory", "variable"),
    [(openai_summarizer, "OPENAI_API_KEY"), (gemini_summarizer, "GOOGLE_API_KEY")],
)
def test_missing_key_names_the_variable(factory: Any, variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(MissingCredentialsError, match=variable):
        factory()


def test_keys_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "g-env")
    openai: Any = openai_summarizer().model
    gemini: Any = gemini_summarizer().model
    assert openai.openai_api_key.get_secret_value() == "sk-env"
    assert gemini.google_api_key.get_secret_value() == "g-env"


@pytest.mark.parametrize(
    ("factory", "module", "extra"),
    [
        (openai_summarizer, "langchain_openai", "openai"),
        (gemini_summarizer, "langchain_google_genai", "google"),
    ],
)
def test_missing_extra_names_it(
    factory: Any, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes the package unimportable
    with pytest.raises(MissingExtraError, match=rf"langchain-rolling-memory\[{extra}\]"):
        factory(api_key="k")


def test_the_retry_wait_starts_at_backoff_without_a_deprecation_on_any_tenacity() -> None:
    """tenacity 9.2 renamed the first wait `initial` -> `multiplier` (the old name warns); the
    summarizer's retry names it as the installed tenacity does and waits backoff, doubling."""
    from tenacity import RetryCallState

    summarizer = chat_model_summarizer(_model(SUMMARY), retries=3, backoff=0.25, max_backoff=4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wait = summarizer._call._kwargs_retrying["wait"]  # type: ignore[attr-defined]  # what each call retries with
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
    for attempt, low, high in [(1, 0.25, 0.5), (3, 1.0, 1.25), (10, 4.0, 4.0)]:
        state.attempt_number = attempt
        assert low <= wait(state) <= high
