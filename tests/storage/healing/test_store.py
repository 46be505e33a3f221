"""HealingStore over the project's SQLite store, against a store that never fails.

Random puts, deletions (one by one or in a batch), gets and searches over a few
namespaces, with outages: every read during an outage answers what was written during
it, and, where the database still answers reads (`reads_while_down`), the older items too
but not the ones changed meanwhile; once healed, the database holds exactly what the
never-failing store holds. Then the bound: past `aside_writes` writes in one outage the
oldest are dropped, the newest reach the database, and each outage logs it once; and a
write-back that fails half-way keeps the rest for the next attempt.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
import random
from typing import Any

from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore
import pytest

from custom_components.langgraph_conversation.storage.healing import StorageHealth
from custom_components.langgraph_conversation.storage.healing.store import HealingStore
from custom_components.langgraph_conversation.storage.sqlite import SqliteStore

from . import Switch, Switched, wait_for, wait_up

type MakeHealth = Callable[..., StorageHealth]
type Address = tuple[tuple[str, ...], str]

NAMESPACES = (("memories", "alice"), ("memories", "bob"), ("notes",))
PREFIXES = (*NAMESPACES, ("memories",))
KEYS = ("k0", "k1", "k2")
SEEDS = 100


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = await SqliteStore.open(tmp_path / "memory.db")
    yield store
    await store.aclose()


async def contents(store: BaseStore, prefix: tuple[str, ...]) -> dict[Address, Any]:
    return {
        (tuple(item.namespace), item.key): item.value
        for item in await store.asearch(prefix, limit=100)
    }


@dataclass
class Model:
    """What reads must answer: during an outage (numbered as the health counts them), the
    never-failing store's state when it began, and what was written (None: deleted)
    during it; otherwise the never-failing store's state."""

    reads_while_down: bool
    outage: int = 0
    before: dict[Address, Any] | None = None
    during: dict[Address, Any] = field(default_factory=dict)

    def begin(self, outage: int, state: dict[Address, Any]) -> None:
        self.outage, self.before, self.during = outage, state, {}

    def value(self, reference: dict[Address, Any], address: Address) -> Any:
        if self.before is None:
            return reference.get(address)
        if address in self.during:
            return self.during[address]
        return self.before.get(address) if self.reads_while_down else None

    def found(self, reference: dict[Address, Any], prefix: tuple[str, ...]) -> dict[Address, Any]:
        addresses = set(reference if self.before is None else self.during)
        if self.before is not None and self.reads_while_down:
            addresses |= set(self.before)
        return {
            address: value
            for address in addresses
            if address[0][: len(prefix)] == prefix
            and (value := self.value(reference, address)) is not None
        }


async def write(rng: random.Random, stores: tuple[BaseStore, ...], number: int) -> list[Address]:
    """A random put, deletion or batch of both, on each store; the addresses written."""
    ops = [
        PutOp(
            rng.choice(NAMESPACES),
            rng.choice(KEYS),
            None if rng.random() < 0.3 else {"text": f"value {number}.{index}"},
        )
        for index in range(rng.choice((1, 1, 2)))
    ]
    for store in stores:
        if len(ops) > 1:
            await store.abatch(ops)
        elif ops[0].value is None:
            await store.adelete(ops[0].namespace, ops[0].key)
        else:
            await store.aput(ops[0].namespace, ops[0].key, ops[0].value)
    return [(op.namespace, op.key) for op in ops]


async def play(seed: int, folder: Path, make_health: MakeHealth, reads_while_down: bool) -> None:
    rng = random.Random(seed)
    switch, reference = Switch(), InMemoryStore()
    database = await SqliteStore.open(folder / f"memory-{seed}.db")
    health = make_health(switch, reads_while_down=reads_while_down)
    switched = Switched(database, switch)
    store, model = HealingStore(lambda: switched, health), Model(reads_while_down)
    try:
        for number in range(rng.randint(15, 40)):
            roll = rng.random()
            if roll < 0.1 and switch.on:
                switch.off(read_only=reads_while_down)
            elif roll < 0.2 and not switch.on:
                switch.switch_on()  # writes may meet the write-back until the next read
            elif roll < 0.55:
                state = await contents(reference, ())
                written = await write(rng, (store, reference), number)
                if not health.up:  # the write went to memory
                    if health.outage.outages != model.outage:
                        model.begin(health.outage.outages, state)
                    after = await contents(reference, ())
                    model.during.update({address: after.get(address) for address in written})
            else:
                await read(rng, store, reference, model, health, switch)
        switch.switch_on()
        await wait_up(health)
        for prefix in PREFIXES:
            assert await contents(database, prefix) == await contents(reference, prefix), seed
    except AssertionError as err:
        raise AssertionError(f"seed {seed}: {err}") from err
    finally:
        await database.aclose()


async def read(
    rng: random.Random,
    store: HealingStore,
    reference: BaseStore,
    model: Model,
    health: StorageHealth,
    switch: Switch,
) -> None:
    """A get or a search, checked against the model (after the write-back, if the
    database is back: a read during it may see either side)."""
    if switch.on:
        await wait_up(health)
    state = await contents(reference, ())
    if health.up:
        model.before = None  # all written back: the database is the reference
        if not switch.on and not switch.read_only:
            model.begin(health.outage.outages + 1, state)  # this read finds it down
    if rng.random() < 0.5:
        address = (rng.choice(NAMESPACES), rng.choice(KEYS))
        found = await store.aget(*address)
        assert (found.value if found else None) == model.value(state, address), address
    else:
        prefix = rng.choice(PREFIXES)
        assert await contents(store, prefix) == model.found(state, prefix), prefix


@pytest.mark.parametrize("reads_while_down", [False, True], ids=["server", "file"])
async def test_reads_and_healing_match_a_store_that_never_fails(
    reads_while_down: bool, tmp_path: Path, make_health: MakeHealth
) -> None:
    """Random writes and reads with outages: each read as the model says, and once
    healed the database holds what the never-failing store holds."""
    for seed in range(SEEDS):
        await play(seed, tmp_path, make_health, reads_while_down)


async def test_bound_keeps_the_newest_writes(
    database: SqliteStore, make_health: MakeHealth, caplog: pytest.LogCaptureFixture
) -> None:
    """Six writes in an outage with room for three: the newest three reach the database,
    with one warning per outage."""
    switch = Switch()
    health = make_health(switch)
    switched = Switched(database, switch)
    store = HealingStore(lambda: switched, health, aside_writes=3)
    for outage in (1, 2):
        switch.off()
        for number in range(6):
            await store.aput(("notes",), f"o{outage}-{number}", {"text": str(number)})
        switch.switch_on()
        await wait_up(health)
    assert sorted(key for _, key in await contents(database, ("notes",))) == [
        f"o{outage}-{number}" for outage in (1, 2) for number in (3, 4, 5)
    ]
    warnings = [r for r in caplog.records if "memory writes during the outage" in r.getMessage()]
    assert len(warnings) == 2


async def test_failed_write_back_keeps_the_rest(
    database: SqliteStore, make_health: MakeHealth
) -> None:
    """The database fails again at the third write of the write-back: still down, and the
    next attempt writes what was left, each once."""
    switch = Switch()
    health = make_health(switch)
    switched = Switched(database, switch)
    store = HealingStore(lambda: switched, health)
    switch.off()
    for number in range(5):
        await store.aput(("notes",), f"n{number}", {"text": str(number)})
    await store.adelete(("notes",), "n1")
    switch.switch_on()
    switch.fail_after(3)
    await wait_for(lambda: not switch.on, lambda: "the write-back never reached the third write")
    assert not health.up
    assert len(await contents(database, ("notes",))) == 2  # read past the switch
    switch.switch_on()
    await wait_up(health)
    assert sorted(key for _, key in await contents(database, ("notes",))) == [
        "n0",
        "n2",
        "n3",
        "n4",
    ]


async def test_batch_in_an_outage_hides_the_older_items(
    database: SqliteStore, make_health: MakeHealth
) -> None:
    """A file refusing writes still gives the older memories, but not one a batch deleted
    or replaced during the outage."""
    switch = Switch()
    health = make_health(switch, reads_while_down=True)
    switched = Switched(database, switch)
    store = HealingStore(lambda: switched, health)
    for key in ("gone", "changed", "kept"):
        await store.aput(("notes",), key, {"text": f"old {key}"})
    switch.off(read_only=True)
    await store.abatch(
        [PutOp(("notes",), "gone", None), PutOp(("notes",), "changed", {"text": "new"})]
    )
    assert not health.up
    assert await store.aget(("notes",), "gone") is None
    assert await contents(store, ("notes",)) == {
        (("notes",), "changed"): {"text": "new"},
        (("notes",), "kept"): {"text": "old kept"},
    }
    switch.switch_on()
    await wait_up(health)
    assert await contents(database, ("notes",)) == await contents(store, ("notes",))


async def test_sync_calls_are_refused_with_the_way_to_call(
    database: SqliteStore, make_health: MakeHealth
) -> None:
    """The store is async-only, as the stores below it: a sync call says what to use
    instead (it would block the event loop), and the async call works."""
    store = HealingStore(lambda: database, make_health(Switch()))
    with pytest.raises(RuntimeError, match="async-only: use abatch"):
        store.batch([PutOp(("notes",), "k", {"text": "v"})])
    await store.abatch([PutOp(("notes",), "k", {"text": "v"})])
    found = await database.aget(("notes",), "k")
    assert found is not None
    assert found.value == {"text": "v"}
