"""Figure 7: 20 conversations x 10 turns at once; errors, lost messages, p95 overhead.

All conversations are one signed-in person's (the chat panel's case): separate
conversations of one person must neither share a thread nor wait for each other.

Every turn's text is unique ("conversation 3, turn 7: ..."), so each chat request the
server saw can be tied to its turn (its newest user message) and each conversation's last
request shows whether the model was sent every earlier turn. For our agent the LangGraph
thread itself is read too (the runtime's `messages(thread_id)`).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
import itertools
import logging
from typing import Any

from homeassistant.core import Context

from .context import ANSWER, Bench
from .home import AgentHandle
from .report import Row, Stat, judged, ratio_of
from .turns import TurnResult, converse, wait_for_records

_LOGGER = logging.getLogger(__name__)

P95_TARGET = 2.0
_USER_KEY = "bench_concurrency_user"
_IDS = itertools.count(1)


def turn_text(conversation: int, turn: int) -> str:
    """A unique user message."""
    return f"Conversation {conversation}, turn {turn}: how warm is it in the kitchen?"


async def bench_user(bench: Bench) -> str:
    """The one person who holds every conversation (created once per bench)."""
    user_id = bench.hass.data.get(_USER_KEY)
    if user_id is None:
        user_id = bench.hass.data[_USER_KEY] = (
            await bench.hass.auth.async_create_user("Bench person")
        ).id
    return user_id


async def run_conversation(
    bench: Bench, agent: AgentHandle, conversation: int, turns: int
) -> tuple[str | None, list[tuple[str, TurnResult | None, str | None]]]:
    """`turns` turns of one conversation in order; (conversation id, [(text, result, error)])."""
    conversation_id: str | None = None
    out: list[tuple[str, TurnResult | None, str | None]] = []
    person = Context(user_id=await bench_user(bench))
    for turn in range(turns):
        text = turn_text(conversation, turn)
        try:
            result = await converse(
                bench.hass, bench.server, agent, text, conversation_id, settle=False, context=person
            )
        except Exception as err:  # noqa: BLE001  an error is a result here
            out.append((text, None, f"{type(err).__name__}: {err}"))
            continue
        conversation_id = result.conversation_id
        error = result.error
        if error is None and result.speech != ANSWER:
            error = f"unexpected answer {result.speech!r}"
        out.append((text, result, error))
    return conversation_id, out


async def lost_in_our_thread(bench: Bench, conversation_id: str, texts: list[str]) -> int:
    """Turns missing from our LangGraph thread (user message or its answer)."""
    runtime = bench.ours.entry.runtime_data.runtime
    subentry_id = next(
        sid for sid, sub in bench.ours.entry.subentries.items() if sub.title == bench.ours.label
    )
    from custom_components.langgraph_conversation.agent.memory import Party

    # The thread of the bench's person (no device), as their next turn would find it.
    party = Party(user=await bench_user(bench))
    thread_id = await runtime.find_thread(subentry_id, conversation_id, party)
    messages = await runtime.messages(thread_id)
    humans = [m.content for m in messages if m.type == "human"]
    answers = [m.content for m in messages if m.type == "ai" and m.content]
    missing = sum(1 for text in texts if text not in humans)
    return missing + max(0, len(texts) - len(answers))


def lost_in_requests(requests: list[dict[str, Any]], texts: list[str]) -> int:
    """Earlier turns missing from the conversation's last request to the model."""
    last = next(
        (
            r
            for r in reversed(requests)
            if any(m.get("role") == "user" and m.get("content") == texts[-1] for m in r["messages"])
        ),
        None,
    )
    if last is None:
        return len(texts)
    users = [m.get("content") for m in last["messages"] if m.get("role") == "user"]
    assistants = [m for m in last["messages"] if m.get("role") == "assistant"]
    missing_users = sum(1 for text in texts if text not in users)
    missing_answers = max(0, len(texts) - 1 - len(assistants))
    return missing_users + missing_answers


async def run_agent(
    bench: Bench, agent: AgentHandle, conversations: int, turns: int, parallel: bool
) -> dict[str, Any]:
    """All conversations of one agent, at once or one after the other."""
    ids = [next(_IDS) for _ in range(conversations)]
    if parallel:
        outcomes = await asyncio.gather(*(run_conversation(bench, agent, c, turns) for c in ids))
    else:
        outcomes = [await run_conversation(bench, agent, c, turns) for c in ids]
    await wait_for_records(bench.server, 0)
    by_text = defaultdict(list)
    for record in bench.server.records:
        if (text := record.last_user_text()) is not None:
            by_text[text].append(record)
    overheads, errors, lost = [], [], 0
    for (conversation_id, results), c in zip(outcomes, ids, strict=True):
        texts = [turn_text(c, t) for t in range(turns)]
        for text, result, error in results:
            if error:
                errors.append(error)
                continue
            assert result is not None
            server_time = sum(r.server_time for r in by_text.get(text, []))
            overheads.append((result.wall - server_time) * 1000)
        if conversation_id is None:
            lost += turns
            continue
        if agent is bench.ours:
            lost += await lost_in_our_thread(bench, conversation_id, texts)
        lost += lost_in_requests(
            [r.body for r in bench.server.records if r.body.get("messages")], texts
        )
    return {"overhead_ms": overheads, "errors": errors, "lost_messages": lost}


async def measure(bench: Bench) -> list[Row]:
    """Single-conversation baseline and the parallel run, for both agents."""
    quick = bench.settings.quick
    conversations, turns = (8, 5) if quick else (20, 10)
    baseline_conversations = 1 if quick else 2  # per half
    # Interleaved, so drift on a shared machine touches both agents and both modes: half
    # of each baseline before the parallel runs, half after.
    single: dict[str, list[dict[str, Any]]] = {"ours": [], "core": []}
    parallel: dict[str, dict[str, Any]] = {}
    plan = [(a, False) for a in (bench.ours, bench.core)]
    plan += [(a, True) for a in (bench.ours, bench.core)]
    plan += [(a, False) for a in (bench.core, bench.ours)]
    for agent, in_parallel in plan:
        bench.server.forget()
        count = conversations if in_parallel else baseline_conversations
        outcome = await run_agent(bench, agent, count, turns, parallel=in_parallel)
        if in_parallel:
            parallel[agent.label] = outcome
        else:
            single[agent.label].append(outcome)
        bench.server.forget()
    results: dict[str, dict[str, Any]] = {
        label: {
            "single": {
                key: [v for part in single[label] for v in part[key]]
                if isinstance(single[label][0][key], list)
                else sum(part[key] for part in single[label])
                for key in single[label][0]
            },
            "parallel": parallel[label],
        }
        for label in ("ours", "core")
    }
    bench.raw["concurrency"] = {
        "conversations": conversations,
        "turns": turns,
        "baseline_conversations": baseline_conversations,
        "quick": quick,
        **results,
    }
    notes = []
    if quick:
        notes.append(
            f"--quick: figure 7 runs {conversations} conversations x {turns} turns "
            "(the full run: 20 x 10)"
        )
    rows: list[Row] = []
    stats = {}
    for label in ("ours", "core"):
        single = Stat.of(results[label]["single"]["overhead_ms"])
        parallel = Stat.of(results[label]["parallel"]["overhead_ms"])
        stats[label] = (single, parallel)
    ours_single, ours_parallel = stats["ours"]
    core_single, core_parallel = stats["core"]
    growth = ours_parallel.p95 / ours_single.p95 if ours_parallel and ours_single else None
    core_growth = core_parallel.p95 / core_single.p95 if core_parallel and core_single else None
    rows.append(
        Row(
            figure=7,
            name=f"turn overhead, {conversations} conversations x {turns} turns in parallel",
            unit="ms",
            ours=ours_parallel,
            core=core_parallel,
            ratio=ratio_of(ours_parallel, core_parallel),
            target=f"p95 ≤ {P95_TARGET:.0f} x single-conversation p95",
            outcome=judged(None if growth is None else growth <= P95_TARGET),
            detail=(
                f"ours p95 {growth:.2f}x its single p95"
                + (f", core {core_growth:.2f}x" if core_growth else "")
                if growth
                else ""
            ),
            notes=notes,
        )
    )
    rows.append(
        Row(
            figure=7,
            name="turn overhead, one conversation at a time (baseline)",
            unit="ms",
            ours=ours_single,
            core=core_single,
            ratio=ratio_of(ours_single, core_single),
            target="(baseline)",
            outcome="info",
        )
    )
    for key, name in (("errors", "errors in the parallel run"), ("lost_messages", "lost messages")):
        ours_value = results["ours"]["parallel"][key]
        core_value = results["core"]["parallel"][key]
        ours_count = len(ours_value) if isinstance(ours_value, list) else ours_value
        core_count = len(core_value) if isinstance(core_value, list) else core_value
        rows.append(
            Row(
                figure=7,
                name=name,
                unit="count",
                ours=Stat.single(ours_count),
                core=Stat.single(core_count),
                target="0",
                outcome=judged(ours_count == 0),
                single=True,
            )
        )
    return rows
