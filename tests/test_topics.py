"""Topic-aware compaction: the detector, the cut, the sections, and the presets."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_rolling_memory import (
    PRESETS,
    RollingStore,
    RollingSummaryChatMessageHistory,
    keyword_topic_shift,
    preset,
)
from langchain_rolling_memory.core.topics import TopicLabels, compose_sections, topic_cut
from langchain_rolling_memory.errors import ConfigurationError

SHIFT = keyword_topic_shift()


def NOV_30() -> datetime.date:  # the wall clock the engine dates finished topics with
    return datetime.date(2026, 11, 30)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Autre chose : où en est ma facture ?", True, id="fr-autre-chose"),
        pytest.param("AUTRE CHOSE", True, id="case"),
        pytest.param("Changement de sujet, svp", True, id="fr-changement"),
        pytest.param("Rien a voir, mais...", True, id="accents-ignored"),
        pytest.param("New topic: the invoice", True, id="en-new-topic"),
        pytest.param("I have another question about billing", True, id="en-another-question"),
        pytest.param("Something else: my address changed", True, id="en-something-else"),
        pytest.param("Can you deliver on Saturday?", False, id="same-topic"),
        pytest.param("Is this a newtopical issue?", False, id="whole-words-only"),
        pytest.param("quelque chose d'autre", False, id="not-a-listed-phrase"),
    ],
)
def test_keyword_detector(text: str, expected: bool) -> None:
    assert SHIFT(HumanMessage(text)) is expected


@pytest.mark.parametrize(
    "text",
    [
        # The lesson's phrases, with and without accents, in any case.
        pytest.param("Par ailleurs, pouvez-vous changer mon adresse ?", id="fr-par-ailleurs"),
        pytest.param("J'aimerais aussi savoir le prix de la livraison.", id="fr-jaimerais-aussi"),
        pytest.param("J’aimerais aussi un devis.", id="fr-curly-apostrophe"),
        pytest.param("Question différente : quels sont vos horaires ?", id="fr-question-differente"),
        pytest.param("question differente: vos horaires ?", id="fr-without-accent"),
        pytest.param("Changement de sujet : ma facture de mars.", id="fr-changement-de-sujet"),
        pytest.param("J'ai une autre question sur ma facture.", id="fr-autre-question"),
        pytest.param("D'autre part, le colis est abîmé.", id="fr-dautre-part"),
        # Their common English counterparts.
        pytest.param("By the way, can I change my address?", id="en-by-the-way"),
        pytest.param("I'd also like a quote for 3 chairs.", id="en-id-also-like"),
        pytest.param("I would also like to know your hours.", id="en-i-would-also-like"),
        pytest.param("Different question: what are your hours?", id="en-different-question"),
        pytest.param("Change of subject: my March invoice.", id="en-change-of-subject"),
        pytest.param("On another note, the parcel is damaged.", id="en-on-another-note"),
        pytest.param("One more thing: do you ship to Lyon?", id="en-one-more-thing"),
    ],
)
def test_lesson_topic_phrases_are_caught(text: str) -> None:
    assert SHIFT(HumanMessage(text)) is True


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Je paie parailleurs en espèces", id="fr-glued-words"),
        pytest.param("The baby the way she sleeps is fine", id="en-by-inside-baby"),
        pytest.param("Mes questions différentes ont été traitées", id="fr-plural-is-another-word"),
        pytest.param("Can you deliver by the wayside shop?", id="en-phrase-inside-longer-word"),
        pytest.param("J'aimerais aussitôt être livrée", id="fr-aussitot"),
        pytest.param("I'd also liked the blue one", id="en-liked"),
    ],
)
def test_topic_phrases_do_not_fire_inside_other_words(text: str) -> None:
    assert SHIFT(HumanMessage(text)) is False


def test_only_user_messages_start_a_topic() -> None:
    assert SHIFT(AIMessage("Another question for you?")) is False


def test_detector_phrases_can_be_replaced_or_extended() -> None:
    custom = keyword_topic_shift(["next ticket"])
    extended = keyword_topic_shift(extra=["au fait"])
    assert custom(HumanMessage("Next ticket please"))
    assert not custom(HumanMessage("new topic"))
    assert extended(HumanMessage("Au fait, ma commande ?"))
    assert extended(HumanMessage("new topic"))
    with pytest.raises(ConfigurationError, match="at least one phrase"):
        keyword_topic_shift([" "])


def _msgs(*texts: str) -> list[BaseMessage]:
    return [HumanMessage(t) if i % 2 == 0 else AIMessage(t) for i, t in enumerate(texts)]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        pytest.param(_msgs("invoice?", "paid", "new topic: delivery", "ok"), 2, id="ends-before-the-shift"),
        pytest.param(
            _msgs("new topic: delivery", "ok", "when?"), 0, id="shift-at-start-is-the-current-topic"
        ),
        pytest.param(_msgs("a", "b", "c", "d"), 0, id="no-shift"),
        pytest.param(
            _msgs("a", "b", "new topic: x", "y", "another question", "z"), 2, id="first-shift-first"
        ),
    ],
)
def test_topic_cut(messages: list[BaseMessage], expected: int) -> None:
    assert topic_cut(messages, SHIFT) == expected


def test_topic_cut_keeps_a_tool_call_with_its_result() -> None:
    # A (malformed) shift right after a tool call must not split the call from its result.
    messages: list[BaseMessage] = [
        HumanMessage("weather?"),
        AIMessage("", tool_calls=[{"name": "w", "args": {}, "id": "c1"}]),
        HumanMessage("new topic"),
        ToolMessage("sunny", tool_call_id="c1"),
    ]
    assert topic_cut(messages, SHIFT) == 1


def test_sections_are_kept_and_only_the_open_one_is_rewritten() -> None:
    labels = TopicLabels()
    text, meta = compose_sections(
        {}, "Invoice 12 paid.", closing=True, labels=labels, max_sections=5, max_words=50
    )
    assert text == "Topic 1: Invoice 12 paid."
    text, meta = compose_sections(
        meta, "Delivery Saturday.", closing=False, labels=labels, max_sections=5, max_words=50
    )
    assert text == "Topic 1: Invoice 12 paid.\n\nCurrent topic: Delivery Saturday."
    assert meta["open_section"] == "Delivery Saturday."


def test_sections_beyond_the_limit_are_joined_oldest_first() -> None:
    meta: dict[str, object] = {}
    for i in range(4):
        _, meta = compose_sections(
            meta, f"T{i}.", closing=True, labels=TopicLabels(), max_sections=3, max_words=50
        )
    assert meta["topic_sections"] == ["T0. T1.", "T2.", "T3."]


def test_finished_topics_carry_the_date_given() -> None:
    labels = TopicLabels()
    text, meta = compose_sections(
        {}, "Invoice 12 paid.", closing=True, labels=labels, max_sections=5, max_words=50, date="2026-11-28"
    )
    assert text == "Topic 1 (2026-11-28): Invoice 12 paid."
    text, meta = compose_sections(
        meta,
        "Delivery Saturday.",
        closing=False,
        labels=labels,
        max_sections=5,
        max_words=50,
        date="2026-11-30",
    )
    assert text == "Topic 1 (2026-11-28): Invoice 12 paid.\n\nCurrent topic: Delivery Saturday."
    text, meta = compose_sections(
        meta,
        "Delivery moved to Saturday.",
        closing=True,
        labels=TopicLabels("Sujet {n}", "Sujet en cours"),
        max_sections=5,
        max_words=50,
        date=datetime.date(2026, 11, 30),
    )
    assert (
        text == "Sujet 1 (2026-11-28): Invoice 12 paid.\n\nSujet 2 (2026-11-30): Delivery moved to Saturday."
    )
    assert meta["topic_dates"] == ["2026-11-28", "2026-11-30"]


def test_without_a_date_the_sections_and_meta_are_unchanged() -> None:
    labels = TopicLabels()
    undated = compose_sections(
        {}, "Invoice 12 paid.", closing=True, labels=labels, max_sections=5, max_words=50
    )
    assert undated == (
        "Topic 1: Invoice 12 paid.",
        {"topic_sections": ["Invoice 12 paid."], "open_section": ""},
    )


def test_a_dated_topic_after_undated_ones_and_a_join_keeps_the_newer_date() -> None:
    labels = TopicLabels()
    _, meta = compose_sections({}, "T0.", closing=True, labels=labels, max_sections=2, max_words=50)
    text, meta = compose_sections(
        meta, "T1.", closing=True, labels=labels, max_sections=2, max_words=50, date="2026-11-29"
    )
    assert text == "Topic 1: T0.\n\nTopic 2 (2026-11-29): T1."
    text, meta = compose_sections(
        meta, "T2.", closing=True, labels=labels, max_sections=2, max_words=50, date="2026-11-30"
    )
    assert text == "Topic 1 (2026-11-29): T0. T1.\n\nTopic 2 (2026-11-30): T2."


# ---------------------------------------------------------------- through a history


class Recorder:
    """A summarizer that records what it was asked to fold and numbers its summaries."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def __call__(self, previous: str, messages: Sequence[BaseMessage]) -> str:
        self.calls.append((previous, [m.text for m in messages]))
        return f"S{len(self.calls)}"


def test_a_topic_shift_folds_the_finished_topic_at_once(store: RollingStore) -> None:
    recorder = Recorder()
    history = RollingSummaryChatMessageHistory(
        "topics",
        summarizer=recorder,
        store=store,
        max_turns=12,
        keep_last=4,
        topic_detector=SHIFT,
        today=NOV_30,
    )
    history.add_messages(_msgs("My invoice 12 is wrong", "Fixed, sorry."))
    assert recorder.calls == []  # under max_turns, same topic: nothing to fold
    history.add_messages(_msgs("Autre chose : livraison samedi ?", "Oui."))
    assert recorder.calls == [("", ["My invoice 12 is wrong", "Fixed, sorry."])]
    assert history.summary == "Topic 1 (2026-11-30): S1"
    assert [m.text for m in history.messages[1:]] == ["Autre chose : livraison samedi ?", "Oui."]


def test_within_a_topic_only_its_own_section_is_sent_and_rewritten(store: RollingStore) -> None:
    recorder = Recorder()
    history = RollingSummaryChatMessageHistory(
        "topics2",
        summarizer=recorder,
        store=store,
        max_turns=4,
        keep_last=2,
        topic_detector=SHIFT,
        today=None,
    )
    history.add_messages(_msgs("invoice 12?", "paid"))
    history.add_messages(_msgs("new topic: delivery", "Saturday"))  # closes topic 1
    history.add_messages(_msgs("which hour?", "9am", "which door?", "back"))  # 6 > 4: fold in topic 2
    assert recorder.calls[1][0] == ""  # the open section was empty: topic 1 is not resent
    assert recorder.calls[1][1][0] == "new topic: delivery"
    assert history.summary == "Topic 1: S1\n\nCurrent topic: S2"
    history.add_messages(_msgs("and the price?", "free", "thanks", "welcome"))
    assert recorder.calls[2][0] == "S2"  # only the current topic's section is updated
    assert history.summary == "Topic 1: S1\n\nCurrent topic: S3"
    history.add_messages(_msgs("another question: my password", "reset sent"))
    assert history.summary.startswith("Topic 1: S1\n\nTopic 2: S4")


def test_french_histories_label_sections_in_french() -> None:
    history = RollingSummaryChatMessageHistory(
        "fr",
        summarizer=Recorder(),
        max_turns=12,
        keep_last=4,
        topic_detector=SHIFT,
        language="fr",
        today=NOV_30,
    )
    history.add_messages(_msgs("facture 12 ?", "payée", "Autre question : la livraison ?", "samedi"))
    assert history.summary == "Sujet 1 (2026-11-30): S1"


async def test_async_histories_fold_topics_too(store: RollingStore) -> None:
    recorder = Recorder()
    history = RollingSummaryChatMessageHistory(
        "topics-async",
        summarizer=recorder,
        store=store,
        max_turns=12,
        keep_last=4,
        topic_detector=SHIFT,
        today=NOV_30,
    )
    await history.aadd_messages(_msgs("invoice?", "paid", "new topic please", "sure"))
    assert await history.asummary() == "Topic 1 (2026-11-30): S1"


def test_without_a_detector_nothing_changes() -> None:
    recorder = Recorder()
    history = RollingSummaryChatMessageHistory("plain", summarizer=recorder, max_turns=12, keep_last=4)
    history.add_messages(_msgs("invoice?", "paid", "new topic please", "sure"))
    assert recorder.calls == []
    assert history.summary == ""


# ---------------------------------------------------------------- presets


@pytest.mark.parametrize(
    ("name", "max_turns", "sections"),
    [("support", 6, True), ("consultation", 10, True), ("tutorial", 4, False), ("chat", 8, False)],
)
def test_presets_give_documented_starting_points(name: str, max_turns: int, sections: bool) -> None:
    settings = preset(name)
    assert settings["max_turns"] == max_turns
    assert 1 <= settings["keep_last"] < max_turns
    assert (settings["topic_detector"] is not None) is sections
    assert PRESETS[name].why


def test_preset_spreads_into_a_history_and_overrides_win() -> None:
    recorder = Recorder()
    history = RollingSummaryChatMessageHistory("p", summarizer=recorder, **preset("tutorial", keep_last=1))
    assert (history.compactor.policy.max_turns, history.compactor.policy.keep_last) == (4, 1)
    history.add_messages(_msgs("step 1", "done", "step 2", "done", "step 3"))
    assert recorder.calls[0][1] == ["step 1", "done", "step 2", "done"]


@pytest.mark.parametrize(
    ("lesson_name", "ours"),
    [
        ("support_client", "support"),
        ("consultation", "consultation"),
        ("tutoriel", "tutorial"),
        ("conversation_libre", "chat"),
    ],
)
def test_the_lessons_preset_names_are_aliases_of_ours(lesson_name: str, ours: str) -> None:
    theirs, mine = preset(lesson_name), preset(ours)
    assert (theirs["topic_detector"] is None) is (mine["topic_detector"] is None)
    theirs.pop("topic_detector")
    mine.pop("topic_detector")
    assert theirs == mine
    assert preset(lesson_name, keep_last=1)["keep_last"] == 1


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"chat.*consultation.*support.*tutorial"):
        preset("sales")
