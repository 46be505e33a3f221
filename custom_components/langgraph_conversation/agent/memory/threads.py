"""Which thread a turn continues: a thread belongs to whoever opened it.

A thread is keyed by the agent, the conversation id and the party talking: the device
(voice satellite) and the signed-in user, whichever the turn has, or nobody (an
automation). A conversation id that another user or device sends again never reaches
the first party's thread: the newcomer gets a thread of their own.

"Continue recent" is for voice: a satellite starts a new conversation at every wake word
(and Home Assistant a new id after five quiet minutes or a restart), yet "turn it off
again" should still work. So a new conversation continues the party's most recent
thread when all of these hold: Home Assistant issued its id (the client named no
existing conversation), the party is the same device (and the same user, if any), and
the last use lies within the window. Text clients (user only) do that only when the
agent says so; turns without a device or user never do. A client that names a
conversation Home Assistant has since forgotten (an expired id it replaced) continues
that conversation's thread, for the same party only.

Links (conversation → thread) are rows of a small table, kept in threads.db next to the
threads (storage/sqlite/links.py) or in memory when that file is unavailable; the rule lives
here, as plain functions over that table, so it runs whole inside one transaction.

Threads from before conversations had owners (the release before the rework, commit
446498e, and older) are keyed by agent and conversation id alone, and record nobody: no
user, no device, in their checkpoints, messages or metadata. Whose one is can only be told
by who knows its conversation id. One that Home Assistant issued went to the client that
asked, and to nobody else; after the update's restart Home Assistant no longer knows it
and issues a new one, so it comes back as the replaced id. The first party to bring it back
continues that thread, which is linked to them from then on (so nobody else can). An id a
client chose itself could have been sent by anybody: such a thread is not continued, a
warning says so when its id comes back, and it stays stored until it expires.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
import hashlib
import json
import logging
import re
from typing import Protocol

_LOGGER = logging.getLogger(__name__)

# The party of a turn without device or user (automations, scripts).
NOBODY = "nobody"

# The form of the conversation ids Home Assistant issues: ULIDs, 26 characters of
# Crockford's base32 whose first is at most 7. Home Assistant never adopts a client's id
# of this form (it issues a new one instead), so an id of this form was issued by it.
_ISSUED_ID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")


@dataclass(frozen=True, slots=True)
class Party:
    """Who is talking: the device (voice satellite) and the signed-in user, if known."""

    device: str | None = None
    user: str | None = None

    @property
    def key(self) -> str:
        """A stable key, equal only for the same device and user, without ":".

        Hashed from an unambiguous encoding: ids are chosen by clients (a device id
        of "x,user=y" must not pass for device x with user y).
        """
        if self.device is None and self.user is None:
            return NOBODY
        encoded = json.dumps([self.device, self.user], separators=(",", ":"))
        return "p" + hashlib.sha256(encoded.encode()).hexdigest()[:32]


def thread_id_for(agent_id: str, conversation_id: str, party: Party) -> str:
    """The thread of a conversation that continues nothing older.

    The party key has a fixed form without ":", so the id is unambiguous whatever the
    conversation id holds.
    """
    return f"{agent_id}:{party.key}:{conversation_id}"


def earlier_thread_id(agent_id: str, conversation_id: str) -> str:
    """The thread id the release before conversations had owners gave a conversation."""
    return f"{agent_id}:{conversation_id}"


def continue_window(
    party: Party, *, issued_now: bool, minutes: float, text_clients: bool
) -> float | None:
    """Seconds back a turn may continue its party's most recent thread; None: never.

    `issued_now`: Home Assistant issued the conversation id for this turn (the client
    named none, or one that had expired). `text_clients`: the agent lets a user without
    a device (chat panel, API) continue too.
    """
    if not issued_now or minutes <= 0:
        return None
    if party.device is None and not (text_clients and party.user is not None):
        return None
    return minutes * 60


@dataclass(frozen=True, slots=True)
class ThreadRequest:
    """A turn asking for its thread."""

    agent_id: str
    conversation_id: str
    party: Party
    # The conversation id the client sent when Home Assistant replaced it (it had
    # expired): the same party's thread of that conversation continues.
    replaced_id: str | None = None
    # See continue_window.
    window: float | None = None
    # Home Assistant issued the conversation id for this very turn (see continue_window).
    issued_now: bool = False


@dataclass(frozen=True, slots=True)
class ThreadChoice:
    """The thread a turn continues, and how it was found."""

    thread_id: str
    # Another party has used this conversation id with this agent: what others said in
    # it (Home Assistant's chat log) is theirs, not this party's.
    shared: bool = False
    # Continued from another conversation id (continue recent, or an expired id).
    linked: bool = False


class LinkTable(Protocol):
    """The links (agent, party, conversation) → thread; called inside one transaction."""

    def thread_of(self, agent_id: str, party: str, conversation_id: str) -> str | None:
        """The thread a conversation of this party continues, if it was seen."""

    def latest_thread(self, agent_id: str, party: str, since: float) -> str | None:
        """The thread of the party's most recently used conversation, if used since."""

    def used_by_others(self, agent_id: str, conversation_id: str, party: str) -> bool:
        """Whether another party has used this conversation id with this agent."""

    def put(
        self, agent_id: str, party: str, conversation_id: str, thread_id: str, now: float
    ) -> None:
        """Record (or refresh) a conversation's thread, used at `now`."""

    def forget_thread(self, thread_id: str) -> None:
        """Remove every link to a thread (it was deleted)."""

    def has_unlinked_thread(self, thread_id: str) -> bool:
        """Whether the thread has checkpoints and no link points at it (one written by a
        release before the links, nobody has continued since)."""


class LinkStore(Protocol):
    """Runs a function over the link table in one transaction."""

    async def read[T](self, work: Callable[[LinkTable], T]) -> T:
        """Run `work` in a read transaction."""

    async def write[T](self, work: Callable[[LinkTable], T]) -> T:
        """Run `work` in a write transaction."""


def known_choice(request: ThreadRequest) -> ThreadChoice | None:
    """What choose_thread will choose, where that is known without reading the links.

    A conversation id Home Assistant issued for this very turn has no link yet: nobody
    could have used it before. Without an expired id to continue (replaced_id) and a
    window to continue the party's recent thread within, the turn starts the party's own
    thread of it, which nobody else shares.
    """
    if not request.issued_now or request.replaced_id is not None or request.window is not None:
        return None
    return ThreadChoice(thread_id_for(request.agent_id, request.conversation_id, request.party))


def choose_thread(table: LinkTable, request: ThreadRequest, now: float) -> ThreadChoice:
    """Find (and record) the thread of a turn; the whole rule, in one transaction."""
    agent, party, conversation = request.agent_id, request.party.key, request.conversation_id
    shared = table.used_by_others(agent, conversation, party)
    thread_id = table.thread_of(agent, party, conversation)
    linked = False
    if thread_id is None and request.replaced_id:
        thread_id = table.thread_of(agent, party, request.replaced_id) or _claim_earlier_thread(
            table, request, now
        )
        linked = thread_id is not None
    if thread_id is None and request.window is not None:
        thread_id = table.latest_thread(agent, party, now - request.window)
        linked = thread_id is not None
    if thread_id is None:
        _warn_of_an_ownerless_thread(table, agent, conversation)
        thread_id = thread_id_for(agent, conversation, request.party)
    table.put(agent, party, conversation, thread_id, now)
    return ThreadChoice(thread_id, shared=shared, linked=linked)


def _claim_earlier_thread(table: LinkTable, request: ThreadRequest, now: float) -> str | None:
    """The earlier release's thread of the id Home Assistant replaced, if nobody has
    continued it yet: from now on it is this party's (see the module's docstring)."""
    replaced = request.replaced_id
    if replaced is None or not _ISSUED_ID.fullmatch(replaced):
        return None
    thread_id = earlier_thread_id(request.agent_id, replaced)
    if not table.has_unlinked_thread(thread_id):
        return None
    # The link makes the claim: a thread a link points at is nobody else's to claim.
    table.put(request.agent_id, request.party.key, replaced, thread_id, now)
    _LOGGER.info("Conversation %s from before the update continues", replaced)
    return thread_id


def _warn_of_an_ownerless_thread(table: LinkTable, agent_id: str, conversation_id: str) -> None:
    """Say so when a conversation id a client chose comes back to an earlier release's
    thread: whose it is cannot be told, so it is not continued (nor deleted)."""
    if _ISSUED_ID.fullmatch(conversation_id):
        return  # Home Assistant's own id, issued for this very turn or known to it
    if table.has_unlinked_thread(earlier_thread_id(agent_id, conversation_id)):
        _LOGGER.warning(
            "Conversation %r was held before the update, when conversations had no owner. "
            "Its id was chosen by the client, so anybody could have sent it and whose it is "
            "cannot be told: it is not continued, a new one starts. The earlier one stays "
            "stored until it is idle for the days set to delete conversations",
            conversation_id,
        )


def find_thread(table: LinkTable, agent_id: str, conversation_id: str, party: Party) -> str:
    """The thread a conversation of this party continues, as a turn would find it
    (without recording anything): its link, else its own thread id."""
    found = table.thread_of(agent_id, party.key, conversation_id)
    return found if found is not None else thread_id_for(agent_id, conversation_id, party)


def forget_thread(table: LinkTable, thread_id: str) -> None:
    """Remove the links to a deleted thread."""
    table.forget_thread(thread_id)


# Links kept when they live in memory (least recently used go first).
_MEMORY_LINKS = 2000


class MemoryLinkTable:
    """The link table in memory: when threads.db is unavailable (threads are too)."""

    def __init__(self, limit: int = _MEMORY_LINKS) -> None:
        self._rows: OrderedDict[tuple[str, str, str], tuple[str, float]] = OrderedDict()
        self._limit = limit

    def thread_of(self, agent_id: str, party: str, conversation_id: str) -> str | None:
        row = self._rows.get((agent_id, party, conversation_id))
        return row[0] if row is not None else None

    def latest_thread(self, agent_id: str, party: str, since: float) -> str | None:
        best: tuple[str, float] | None = None
        for (agent, owner, _), (thread_id, used) in self._rows.items():
            if (
                agent == agent_id
                and owner == party
                and used >= since
                and (best is None or used >= best[1])
            ):
                best = (thread_id, used)
        return best[0] if best is not None else None

    def used_by_others(self, agent_id: str, conversation_id: str, party: str) -> bool:
        return any(
            agent == agent_id and conversation == conversation_id and owner != party
            for agent, owner, conversation in self._rows
        )

    def put(
        self, agent_id: str, party: str, conversation_id: str, thread_id: str, now: float
    ) -> None:
        key = (agent_id, party, conversation_id)
        self._rows[key] = (thread_id, now)
        self._rows.move_to_end(key)
        while len(self._rows) > self._limit:
            self._rows.popitem(last=False)

    def forget_thread(self, thread_id: str) -> None:
        for key in [key for key, row in self._rows.items() if row[0] == thread_id]:
            del self._rows[key]

    def has_unlinked_thread(self, thread_id: str) -> bool:
        """Never: threads kept in memory were all chosen through this table."""
        return False


class MemoryLinkStore:
    """LinkStore over a MemoryLinkTable (the work runs at once, on the loop)."""

    def __init__(self) -> None:
        self._table = MemoryLinkTable()

    async def read[T](self, work: Callable[[LinkTable], T]) -> T:
        return work(self._table)

    async def write[T](self, work: Callable[[LinkTable], T]) -> T:
        return work(self._table)
