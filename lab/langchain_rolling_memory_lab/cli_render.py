"""Rich rendering of what the CLI commands produce (demo turns, replay figures, sessions).

Presentation only: the figures come from `demo`, `replay` and the store; rich is imported by
the caller's console (the ``cli`` extra).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich import box
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from langchain_rolling_memory.core.cuts import count_tokens
from langchain_rolling_memory.core.framing import summary_message
from langchain_rolling_memory.core.usage import SummaryUsage
from langchain_rolling_memory.stores.api import RollingStore
from langchain_rolling_memory_lab.demo import DemoTurn
from langchain_rolling_memory_lab.replay import CompactionDetails, ReplayReport


def _pct(saved: int, full: int) -> str:
    return f"{100 * saved / full:.0f}%" if full else "-"


def render_demo(console: Any, turns: Iterable[DemoTurn], *, store_url: str, provider: str) -> list[DemoTurn]:
    """Print the demo turn by turn, then the final table; return the turns."""
    model = "offline model (answers only from its prompt)" if provider == "offline" else provider
    summarizer = "keyless extractive summarizer" if provider == "offline" else f"{provider} summarizer"
    console.rule("[bold]rolling-memory demo: a new employee, two sessions")
    console.print(f"store: {escape(store_url)}\nmodel: {model} · summarizer: {summarizer}")
    done: list[DemoTurn] = []
    for turn in turns:
        if turn.turn == 1:
            console.print()
            console.rule(f"[bold cyan]Session {turn.session}[/] ({escape(turn.session_id)})")
            if turn.session > 1:
                facts = "\n".join(f"- {escape(f)}" for f in turn.facts_in_prompt) or "(none)"
                console.print(
                    Panel(
                        facts,
                        title=f"facts injected into session {turn.session}'s prompt (read from the request sent)",
                        border_style="green",
                    )
                )
        _turn(console, turn)
        done.append(turn)
    if done:
        _final(console, done)
    return done


def _turn(console: Any, turn: DemoTurn) -> None:
    saved = turn.full_tokens - turn.rolling_tokens
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", style="bold", min_width=15)
    grid.add_column()
    grid.add_row(f"turn {turn.session}.{turn.turn} [yellow]user[/]", escape(turn.question))
    grid.add_row("[magenta]model[/]", escape(turn.answer))
    grid.add_row(
        "tokens sent",
        f"[bold]{turn.rolling_tokens}[/] with rolling memory, {turn.full_tokens} with the full history "
        f"({'saved ' + _pct(saved, turn.full_tokens) if saved > 0 else 'no saving yet'})",
    )
    for key, text, before in turn.facts_learned:
        label = escape(f"[{key}] ") if key else ""
        if before:
            grid.add_row("[green]fact replaced[/]", f"{label}{escape(text)} (was: {escape(before)})")
        else:
            grid.add_row("[green]fact learned[/]", f"{label}{escape(text)}")
    console.print()
    console.print(grid)
    if turn.summary_changed:
        console.print(
            Panel(escape(turn.summary), title="summary updated (older turns folded)", border_style="blue")
        )


def _final(console: Any, turns: list[DemoTurn]) -> None:
    table = Table(title="tokens sent per turn", title_justify="left")
    for column in ("session", "turn", "full history", "rolling memory", "saved", "facts in prompt"):
        table.add_column(column, justify="right" if column != "session" else "left")
    for t in turns:
        table.add_row(
            str(t.session),
            str(t.turn),
            str(t.full_tokens),
            str(t.rolling_tokens),
            _pct(t.full_tokens - t.rolling_tokens, t.full_tokens),
            str(len(t.facts_in_prompt)),
        )
    full = sum(t.full_tokens for t in turns)
    rolling = sum(t.rolling_tokens for t in turns)
    table.add_row("total", "", str(full), str(rolling), _pct(full - rolling, full), "", style="bold")
    console.print()
    console.print(table)
    last_of_session: dict[int, DemoTurn] = {}
    for t in turns:
        last_of_session[t.session] = t
    compactions = sum(t.compactions for t in last_of_session.values())
    billed = sum(t.summarizer_tokens for t in last_of_session.values())
    estimate = turns[-1].estimated_summarizer_tokens
    if billed or not estimate:
        console.print(f"summarizer: {compactions} summaries, {billed} tokens billed.")
    else:
        console.print(
            f"summarizer: {compactions} summaries; keyless, so 0 tokens billed (an LLM summarizer "
            f"would be billed about {estimate} tokens: {rolling + estimate} in all against {full})."
        )
    last = turns[-1]
    console.print(
        f"The request size is bounded: the last one sent {last.rolling_tokens} tokens against "
        f"{last.full_tokens} with the full history, and the gap grows with every turn "
        "(rolling-memory replay FILE measures long conversations)."
    )
    second = [t for t in turns if t.session > 1]
    if second:
        console.print(
            "Session 2 started with no summary and no transcript of session 1 in its prompt: "
            f"what it knew came from the {len(second[0].facts_in_prompt)} client facts above, including "
            "the team change said in session 1's last message (never folded into a summary)."
        )


def render_replay(console: Any, report: ReplayReport, *, source: str, summarizer: str) -> None:
    """The per-strategy table and the break-even sentence."""
    console.print(
        f"{escape(source)}: {report.messages} messages, {report.sessions} session(s), "
        f"{report.clients} client(s); summarizer: {summarizer}"
    )
    table = Table(box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    headers = (
        "strategy",
        "requests",
        "input",
        "mean",
        "peak",
        "mem calls",
        "mem tokens",
        "total",
        "vs full",
        "cacheable",
        "break-even",
    )
    for h in headers:
        table.add_column(h, justify="left" if h == "strategy" else "right", no_wrap=True)
    for row in report.rows():
        saved = row["saved_vs_full"]
        even = row["break_even"]
        table.add_row(
            str(row["strategy"]),
            str(row["requests"]),
            f"{row['input_tokens']:,}",
            f"{row['mean_request_tokens']:,.0f}",
            f"{row['peak_request_tokens']:,}",
            str(row["memory_calls"]),
            f"{row['memory_tokens']:,}",
            f"{row['total_tokens']:,}",
            "-" if saved is None else f"{-100 * float(str(saved)):+.0f}%",
            f"{100 * float(str(row['cacheable_share'])):.0f}%",
            "-" if even is None else f"msg {even}",
        )
    console.print(table)
    for r in report.results:
        console.print(f"  {r.strategy.name:<14} {r.strategy.label}")
    for name in ("summary", "summary+facts"):
        try:
            result = report.result(name)
        except KeyError:
            continue
        even = report.break_even(name)
        when = f"from message {even} on" if even is not None else "not within this conversation"
        console.print(
            f"{result.strategy.name}: summarizing pays for itself {when} "
            f"({result.memory_calls} memory calls, {result.memory_tokens:,} tokens)."
        )
    console.print(
        "cacheable = share of each request's tokens that repeat the previous request's prefix "
        "(what a provider's prompt cache could serve)."
    )
    _render_detail_retention(console, report)


_LISTED_IN_FULL = 40
"""Compactions listed one by one; past this, the first and last `_LISTED_AT_EACH_END`."""
_LISTED_AT_EACH_END = 15


def _render_detail_retention(console: Any, report: ReplayReport) -> None:
    """Per summary strategy: each compaction's named details kept, and their mean."""
    shown: dict[str, str] = {}  # the rows already printed -> the strategy that printed them
    for result in report.results:
        if result.strategy.kind != "summary":
            continue
        name = result.strategy.name
        rows = report.compaction_rows(name)
        mean = result.detail_retention
        summary = f"mean {100 * mean:.0f}%" if mean is not None else "no detail to keep"
        signature = repr(rows)
        if signature in shown:
            console.print(f"{name}: the same compactions as {shown[signature]} ({summary}).")
            continue
        shown[signature] = name
        if not rows:
            console.print(f"{name}: no compaction, so no summary to measure.")
            continue
        console.print(f"\n{name}: named details (names, numbers, dates, codes) kept by each summary")
        table = Table(
            box=box.SIMPLE_HEAD,
            collapse_padding=True,
            pad_edge=False,
        )
        for h in ("#", "session", "at msg", "folded", "details", "kept", "retention", "lost"):
            table.add_column(h, justify="left" if h in ("session", "lost") else "right", overflow="fold")
        half = _LISTED_AT_EACH_END
        listed: list[tuple[int, CompactionDetails | None]] = list(enumerate(result.compactions, 1))
        if len(listed) > _LISTED_IN_FULL:
            listed = [*listed[:half], (0, None), *listed[-half:]]
        for number, c in listed:
            if c is None:
                table.add_row("…", f"{len(rows) - 2 * half} more", *[""] * 6)
                continue
            lost = [escape(d.text) for d in c.retention.missing]
            table.add_row(
                str(number),
                escape(c.session),
                str(c.at_message),
                str(c.folded),
                str(len(c.retention.details)),
                str(len(c.retention.kept)),
                "-" if c.ratio is None else f"{100 * c.ratio:.0f}%",
                ", ".join(lost[:4]) + (f" +{len(lost) - 4}" if len(lost) > 4 else ""),
            )
        console.print(table)
        console.print(f"{name}: {len(rows)} compactions, named details kept: {summary}.")


def render_client(console: Any, store: RollingStore, client_id: str) -> int:
    sessions = store.sessions(client_id)
    facts = store.facts(client_id)
    table = Table(
        title=f"client {escape(client_id)}: {len(sessions)} sessions, {len(facts)} facts",
        title_justify="left",
    )
    for column in ("session", "messages", "summary version"):
        table.add_column(column)
    for session_id in sessions:
        record = store.summary(session_id)
        table.add_row(
            escape(session_id), str(store.last_seq(session_id)), str(record.version if record else 0)
        )
    console.print(table)
    return 0


def render_session(console: Any, store: RollingStore, session_id: str, *, last: int) -> int:
    info = store.session_info(session_id)
    if info is None:
        console.print(f"no session {escape(session_id)} in this store")
        return 1
    record = store.summary(session_id)
    covered = record.covered_seq if record else 0
    rows = store.read(session_id)
    tail = [r.message for r in rows if r.seq > covered]
    view = ([summary_message(record.text)] if record else []) + tail
    console.print(
        f"session {escape(session_id)} · client {escape(info.client_id or '-')} · {len(rows)} messages "
        f"({count_tokens([r.message for r in rows])} tokens) · next view: {len(view)} messages "
        f"({count_tokens(view)} tokens)"
    )
    if record:
        usage = SummaryUsage.from_record(record)
        console.print(
            Panel(
                escape(record.text),
                title=f"summary v{record.version}, covers messages 1-{record.covered_seq}",
                subtitle=f"{usage.compactions} compactions, {usage.model_calls} model calls, "
                f"{usage.input_tokens} in / {usage.output_tokens} out tokens",
            )
        )
    state = store.get_state(session_id)
    if state:
        console.print(f"state: {escape(str(state))}")
    table = Table(title=f"last {min(last, len(rows))} messages", title_justify="left")
    for column in ("seq", "role", "tokens", "summarized", "content"):
        table.add_column(column, overflow="fold")
    for r in rows[-last:] if last > 0 else []:
        table.add_row(
            str(r.seq),
            r.message.type,
            str(r.tokens or ""),
            "yes" if r.seq <= covered else "",
            escape(r.message.text),
        )
    console.print(table)
    return 0
