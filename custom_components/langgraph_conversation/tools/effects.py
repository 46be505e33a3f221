"""The effect gate: critical effects of the agent's tool calls wait for the requester's yes.

Whether a tool call is critical is decided on what it will *do*, at the one place where
everything it does passes: Home Assistant's service registry. Whatever path a call takes
(an Assist intent with any argument shapes, one of our tools, an exposed script whose
steps unlock a door, `homeassistant.turn_on` on a cover, a scene), the effect reaches
`ServiceRegistry.async_call` as a concrete service on concrete entities, with the turn's
own Context. The gate looks at that call, and if it would unlock or open a lock, disarm an
alarm panel, open a garage door, gate or door, press or switch a button or switch on the
same device as one of those (a garage opener's relay: critical_devices.py), run a script
or automation that touches one of those, or touch an entity the user marked "always needs
my yes", it does not run it: it is held for the requester's answer and the caller gets an
error saying so.

An effect that is no service call (writing an automation by voice) is handed to the gate
by the tool that would have it (`EffectGate.hold`): it is always held, and what it does
runs only after the same yes.

Each turn runs its tools under a Context of its own (a child of the request's), so the
gate holds exactly the calls of that turn and of the scripts it started, and never an
automation's or a person's. A tool of another LLM API (an integration's own, not
Assist's) may call a service without passing the Context it was given: while such a
tool runs (`api_tool_context`), a call without a Context is the turn's. After the turn
the Context stays known for a while: a late step of a script it started is refused, not
run unasked.

Home Assistant has no hook before a service runs (the call-service event is fired for
listeners that cannot stop it), so the gate swaps the class of the running service
registry for a subclass that checks first (`__slots__ = ()`, same layout, every public
method inherited). It is installed while at least one config entry of ours is loaded and
removed after the last one unloads. tests/tools/test_effect_gate.py pins the upstream parts
it relies on: `ServiceRegistry` is slotted without `__dict__`, and `async_call`'s
parameters keep their names.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
import inspect
import logging
import time
from typing import Any, Protocol
import uuid

from homeassistant.components.automation import automations_with_entity, entities_in_automation
from homeassistant.components.script import entities_in_script, scripts_with_entity
from homeassistant.const import ATTR_ENTITY_ID, ENTITY_MATCH_ALL
from homeassistant.core import Context, HomeAssistant, ServiceRegistry, State
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import target as target_helpers

from ..agent.guard import CONFIRMATION_TIMEOUT, HeldEffects, Released, current_tool_call
from .critical_devices import RELAY_DOMAINS, guarded_by, opens_into_home

_LOGGER = logging.getLogger(__name__)

# On locks, alarm panels and such covers every service is critical except these, which
# make the home safer: an unknown service (another integration's, or a generic turn_off
# a mocked or custom platform offers) is never assumed harmless.
SAFE_SERVICES = {
    "lock": frozenset({"lock"}),
    "alarm_control_panel": frozenset(
        {
            "alarm_arm_away",
            "alarm_arm_home",
            "alarm_arm_night",
            "alarm_arm_vacation",
            "alarm_arm_custom_bypass",
            "alarm_trigger",
        }
    ),
    "cover": frozenset({"close_cover", "stop_cover", "close_cover_tilt", "stop_cover_tilt"}),
}
# What the question calls each critical service (others: the service's own words).
_VERBS = {
    ("lock", "unlock"): "unlock",
    ("lock", "open"): "open",
    ("alarm_control_panel", "alarm_disarm"): "disarm",
    ("cover", "open_cover"): "open",
    ("cover", "toggle"): "open",
    ("cover", "set_cover_position"): "open",
}
# Whose name a question in another language uses (spoken.py) for a call that opens.
_NAMED_AS = {("cover", "toggle"): "open_cover", ("cover", "set_cover_position"): "open_cover"}
_SCRIPT_SERVICES = frozenset({"turn_on", "toggle"})
# Keys that name targets; a split call names its entities explicitly instead.
_TARGET_KEYS = ("entity_id", "device_id", "area_id", "floor_id", "label_id")
# How long a finished turn's Context stays known (late script steps are refused), and
# how many are kept.
_RETIRED_SECONDS = 3600.0
_RETIRED_MAX = 512
# Held effects nobody answered are dropped after this (the pause itself expires sooner).
_PENDING_SECONDS = max(CONFIRMATION_TIMEOUT * 5, 600.0)


class ActionWords(Protocol):
    """How a turn's language names an effect in its question (spoken.Phrasebook)."""

    def action(
        self, domain: str, service: str, name: str, detail: Iterable[str] = ()
    ) -> str | None:
        """The effect in the turn's language; None for the gate's own English words."""


class EffectHeld(HomeAssistantError):
    """A service call was held back: it waits for the requester's yes (or was refused)."""


@dataclass(frozen=True, slots=True)
class HeldCall:
    """One service call that waits for a yes, exactly as it will run."""

    call_id: str
    domain: str
    service: str
    data: dict[str, Any]
    return_response: bool
    actions: tuple[str, ...]
    user_id: str | None
    # An effect that is no service call (writing an automation: tools/automations.py):
    # what runs after the yes, under the confirmed call's Context.
    run: Callable[[Context], Awaitable[None]] | None = field(default=None, compare=False)

    @property
    def key(self) -> tuple[str, str, str]:
        """Calls with the same effect run once, however often the model asked."""
        return (self.domain, self.service, repr(sorted(self.data.items(), key=str)))


@dataclass(slots=True)
class _Pending:
    calls: list[HeldCall]
    since: float = field(default_factory=time.monotonic)


class EffectScope:
    """The gate as one turn sees it (confirmation.EffectGuard)."""

    def __init__(
        self,
        gate: EffectGate,
        context: Context,
        marked: frozenset[str],
        words: ActionWords | None = None,
    ) -> None:
        self.gate = gate
        self.context = context
        self.marked = marked
        self.words = words
        self.held: list[HeldCall] = []
        self.closed = False

    def take_held(self) -> HeldEffects | None:
        """The calls held since the last take, now waiting for the answer."""
        if not self.held:
            return None
        calls, self.held = self.held, []
        token = self.gate.park(calls)
        by_call: dict[str, tuple[str, ...]] = {}
        for call in calls:
            by_call[call.call_id] = tuple(
                dict.fromkeys((*by_call.get(call.call_id, ()), *call.actions))
            )
        return HeldEffects(token, by_call)

    async def release(self, token: str, *, confirmed: bool) -> dict[str, Released] | None:
        """Run (after a yes) or drop what `token` holds; see EffectGate.release."""
        return await self.gate.release(token, confirmed=confirmed)

    def close(self) -> None:
        """The turn is over: its Context stays known, and anything it still calls is refused."""
        self.closed = True
        if self.held:
            # Held after its tool had answered (a script step that ran later): nobody was
            # asked, so it does not run.
            _LOGGER.warning(
                "Not done, as nobody was asked in time: %s",
                ", ".join(action for call in self.held for action in call.actions),
            )
            self.held = []
        self.gate.retire(self)


_PARAMETERS = inspect.signature(ServiceRegistry.async_call)


# The turn's Context while one of Home Assistant's LLM API tools runs (set around each
# call by ha_llm_api.py, inherited by the tasks it starts).
api_tool_context: ContextVar[Context | None] = ContextVar(
    "langgraph_conversation_api_tool_context", default=None
)


class _GatedServiceRegistry(ServiceRegistry):
    """Home Assistant's service registry, asking the gate before every call."""

    __slots__ = ()

    async def async_call(self, *args: Any, **kwargs: Any) -> Any:
        gate = _GATES.get(id(self))
        # Most calls are not a turn's: only those with a watched Context are looked at.
        context = kwargs["context"] if "context" in kwargs else _positional_context(args)
        if context is None and (borrowed := api_tool_context.get()) is not None:
            # Made by an API tool that did not pass its Context on: the turn's call (and
            # the logbook says so), gated as one.
            call = _PARAMETERS.bind(self, *args, **kwargs)
            call.apply_defaults()
            call.arguments["context"] = borrowed
            return await self.async_call(*call.args[1:], **call.kwargs)
        if gate is not None and gate.users > 0 and context is not None and gate.watches(context):
            call = _PARAMETERS.bind(self, *args, **kwargs)
            call.apply_defaults()
            passing = gate.check(call.arguments)
            if passing is _HOLD:
                return None
            if passing is not None:
                call.arguments.update(passing)
                return await ServiceRegistry.async_call(*call.args, **call.kwargs)
        return await ServiceRegistry.async_call(self, *args, **kwargs)


# What check returns for a call that is held whole: it "succeeds" without running, as a
# call made with blocking=False would. Raising instead would reach callers that never
# read the error (Home Assistant 2026.2's intents run service calls as background tasks
# and only wait briefly for them); the turn reports the truth to the model instead.
_HOLD: dict[str, Any] = {}

# Where async_call's positional arguments put the context (after domain, service,
# service_data, blocking); the contract test pins the parameter order.
_CONTEXT_POSITION = list(_PARAMETERS.parameters).index("context") - 1


def _positional_context(args: tuple[Any, ...]) -> Context | None:
    return args[_CONTEXT_POSITION] if len(args) > _CONTEXT_POSITION else None


# The gate of each Home Assistant instance, by the id of its service registry (slotted
# without __weakref__, so no weak mapping), with the number of entries using it.
_GATES: dict[int, EffectGate] = {}


class EffectGate:
    """Holds the critical effects of the agent's turns; one per Home Assistant instance."""

    def __init__(self, hass: HomeAssistant) -> None:
        self.hass = hass
        self.users = 0
        self._scopes: dict[str, EffectScope] = {}
        self._retired: OrderedDict[str, tuple[EffectScope, float]] = OrderedDict()
        self._pending: dict[str, _Pending] = {}

    # Installation -----------------------------------------------------------------

    @staticmethod
    def of(hass: HomeAssistant) -> EffectGate:
        """The installed gate (a loaded entry of ours holds it)."""
        gate = _GATES.get(id(hass.services))
        if gate is None or gate.hass is not hass or gate.users <= 0:
            raise RuntimeError("the effect gate is not installed")
        return gate

    @classmethod
    def acquire(cls, hass: HomeAssistant) -> EffectGate:
        """The instance's gate, installed on first use (one per loaded config entry)."""
        registry = hass.services
        gate = _GATES.get(id(registry))
        if gate is not None and gate.hass is not hass:
            gate = None  # a registry of an earlier Home Assistant at the same address
        if gate is None:
            if type(registry) is not ServiceRegistry:
                # Someone else replaced the class: never stack on top of it blindly.
                raise RuntimeError(f"unexpected service registry {type(registry)!r}")
            gate = _GATES[id(registry)] = cls(hass)
            registry.__class__ = _GatedServiceRegistry
        gate.users += 1
        return gate

    def release_use(self) -> None:
        """An entry unloaded; the last one takes the gate out again."""
        self.users -= 1
        if self.users > 0:
            return
        registry = self.hass.services
        if type(registry) is _GatedServiceRegistry:
            registry.__class__ = ServiceRegistry
        # Held calls stay (they expire on their own): a question asked before a reload
        # (every option change reloads the entry) is answered after it.
        self._scopes.clear()
        self._retired.clear()
        if not self._pending:
            _GATES.pop(id(registry), None)

    # Turns ------------------------------------------------------------------------

    def open_scope(
        self, context: Context, marked: Iterable[str] = (), words: ActionWords | None = None
    ) -> EffectScope:
        """Gate every service call made with `context` (a turn's own) from now on; the
        question names held effects in `words` (English without)."""
        scope = EffectScope(self, context, frozenset(marked), words)
        self._scopes[context.id] = scope
        return scope

    def watches(self, context: Context) -> bool:
        """Whether calls made with this Context are a turn's (running or finished)."""
        return context.id in self._scopes or context.id in self._retired

    def retire(self, scope: EffectScope) -> None:
        self._scopes.pop(scope.context.id, None)
        now = time.monotonic()
        self._retired[scope.context.id] = (scope, now)
        while self._retired and (
            len(self._retired) > _RETIRED_MAX
            or now - next(iter(self._retired.values()))[1] > _RETIRED_SECONDS
        ):
            self._retired.popitem(last=False)

    def park(self, calls: list[HeldCall]) -> str:
        """Keep held calls until the answer; the token names them."""
        now = time.monotonic()
        for token in [t for t, p in self._pending.items() if now - p.since > _PENDING_SECONDS]:
            del self._pending[token]
        token = uuid.uuid4().hex
        self._pending[token] = _Pending(calls)
        return token

    async def release(self, token: str, *, confirmed: bool) -> dict[str, Released] | None:
        """Run the calls `token` holds (after a yes) under a fresh Context, each distinct
        effect once; or drop them. Per tool call id, the actions done and failed."""
        pending = self._pending.pop(token, None)
        if pending is None:
            return None
        outcome: dict[str, Released] = {}
        if not confirmed:
            return outcome
        ran: dict[tuple[str, str, str], str | None] = {}
        for call in pending.calls:
            if call.key not in ran:
                ran[call.key] = await self._run_confirmed(call)
            error = ran[call.key]
            before = outcome.get(call.call_id, Released())
            if error is None:
                outcome[call.call_id] = Released((*before.done, *call.actions), before.failed)
            else:
                failed = dict(before.failed or {})
                failed.update(dict.fromkeys(call.actions, error))
                outcome[call.call_id] = Released(before.done, failed)
        return outcome

    async def _run_confirmed(self, call: HeldCall) -> str | None:
        # A new Context (the requester's user, so the logbook says who) that the gate
        # does not know: a confirmed script runs all its steps.
        context = Context(user_id=call.user_id)
        _LOGGER.info("Running confirmed action(s) %s", ", ".join(call.actions))
        try:
            if call.run is not None:
                await call.run(context)
                return None
            await ServiceRegistry.async_call(
                self.hass.services,
                call.domain,
                call.service,
                dict(call.data),
                blocking=True,
                context=context,
                return_response=call.return_response,
            )
        except Exception as err:  # noqa: BLE001  reported to the model and the user
            _LOGGER.warning("Confirmed action %s failed: %s", ", ".join(call.actions), err)
            return str(err) or type(err).__name__
        return None

    def hold(
        self,
        context: Context,
        effect: tuple[str, str, dict[str, Any]],
        action: str,
        run: Callable[[Context], Awaitable[None]],
    ) -> bool:
        """Hold an effect that is no service call until the requester's yes: `effect` is
        what it does (a domain, a verb and its data: the same effect asked twice runs
        once), `action` how the question names it, `run` what runs after the yes.

        Such an effect is always held (the caller decided by what it will do); False when
        `context` is no running turn's, so nobody could be asked: it must not run.
        """
        scope = self._scopes.get(context.id)
        if scope is None or scope.closed:
            return False
        domain, verb, data = effect
        scope.held.append(
            HeldCall(
                call_id=current_tool_call.get() or "",
                domain=domain,
                service=verb,
                data=data,
                return_response=False,
                actions=(action,),
                user_id=scope.context.user_id,
                run=run,
            )
        )
        _LOGGER.info("Holding %s until the user says yes", action)
        return True

    # The check --------------------------------------------------------------------

    def check(self, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        """Called before every service call. Returns None to let the call run as it is,
        replacement arguments to run only its uncritical part, or _HOLD to hold it whole;
        raises EffectHeld to refuse it (a finished turn's late call)."""
        context = arguments.get("context")
        if context is None:
            return None
        scope = self._scopes.get(context.id)
        retired = scope is None and context.id in self._retired
        if scope is None and not retired:
            return None
        if retired:
            scope = self._retired[context.id][0]
        assert scope is not None
        domain = str(arguments["domain"]).lower()
        service = str(arguments["service"]).lower()
        data = {**(arguments.get("service_data") or {}), **(arguments.get("target") or {})}
        try:
            critical, plain = critical_effects(
                self.hass, domain, service, data, scope.marked, scope.words
            )
        except Exception:  # what cannot be understood is not run unasked
            _LOGGER.debug("Could not resolve %s.%s %s", domain, service, data, exc_info=True)
            critical, plain = {"*": f"{service.replace('_', ' ')} ({domain})"}, []
        if not critical:
            return None
        actions = tuple(dict.fromkeys(critical.values()))
        if retired or scope.closed:
            _LOGGER.warning(
                "Refused %s: it was started by a finished conversation turn and was not confirmed",
                ", ".join(actions),
            )
            raise EffectHeld(f"Refused without the user's yes: {', '.join(actions)}")
        held_data = data if "*" in critical else _targeting(data, critical)
        scope.held.append(
            HeldCall(
                call_id=current_tool_call.get() or "",
                domain=domain,
                service=service,
                data=held_data,
                return_response=bool(arguments.get("return_response")),
                actions=actions,
                user_id=scope.context.user_id,
            )
        )
        _LOGGER.info("Holding %s until the user says yes", ", ".join(actions))
        if plain and "*" not in critical:
            # The rest of the call runs now, on exactly its uncritical entities.
            return {"service_data": _targeting(data, plain), "target": None}
        if arguments.get("return_response"):
            # Its caller needs a response, which a held call cannot give.
            raise EffectHeld(f"Waiting for the user's yes before: {', '.join(actions)}")
        return _HOLD


def _targeting(data: dict[str, Any], entity_ids: Iterable[str]) -> dict[str, Any]:
    """The call's data aimed at exactly these entities."""
    kept = {key: value for key, value in data.items() if key not in _TARGET_KEYS}
    return {**kept, ATTR_ENTITY_ID: sorted(entity_ids)}


def _entity_ids(value: Any) -> set[str]:
    """Entity ids as services accept them: a list, or a comma-separated string."""
    items = value if isinstance(value, list | tuple | set) else [value]
    ids: set[str] = set()
    for item in items:
        if isinstance(item, str):
            ids.update(part.strip().lower() for part in item.split(",") if part.strip())
    return ids


def targeted_entities(
    hass: HomeAssistant, domain: str, service: str, data: dict[str, Any]
) -> set[str]:
    """The entities a service call acts on, as Home Assistant will resolve them."""
    if domain == "script" and service not in (*_SCRIPT_SERVICES, "turn_off", "reload"):
        return {f"script.{service}"}  # a script's own service
    raw = data.get(ATTR_ENTITY_ID)
    if raw == ENTITY_MATCH_ALL:
        return set(hass.states.async_entity_ids(domain))
    selection_data = {key: data[key] for key in _TARGET_KEYS if key in data}
    if raw is not None:
        selection_data[ATTR_ENTITY_ID] = sorted(_entity_ids(raw))
    selected = target_helpers.async_extract_referenced_entity_ids(
        hass, target_helpers.TargetSelection(selection_data), expand_group=True
    )
    entities = selected.referenced | selected.indirectly_referenced
    if domain == "homeassistant":
        return entities
    return {entity_id for entity_id in entities if entity_id.split(".", 1)[0] == domain}


def critical_effects(
    hass: HomeAssistant,
    domain: str,
    service: str,
    data: dict[str, Any],
    marked: frozenset[str],
    words: ActionWords | None = None,
) -> tuple[dict[str, str], list[str]]:
    """The critical effects of a call (entity id → action) and its other entities."""
    if domain == "homeassistant":
        # Its services call each domain's own service with the same Context: the gate
        # sees those calls, on their real domain.
        return {}, []
    critical: dict[str, str] = {}
    plain: list[str] = []
    for entity_id in targeted_entities(hass, domain, service, data):
        state = hass.states.get(entity_id)
        action = critical_action(hass, domain, service, entity_id, state, data, marked, words)
        if action is None:
            plain.append(entity_id)
        else:
            critical[entity_id] = action
    return critical, plain


def _name(entity_id: str, state: State | None) -> str:
    return state.name if state is not None else entity_id


def critical_action(
    hass: HomeAssistant,
    domain: str,
    service: str,
    entity_id: str,
    state: State | None,
    data: dict[str, Any],
    marked: frozenset[str],
    words: ActionWords | None = None,
) -> str | None:
    """How the question names this effect ("unlock Front Door", in `words`' language when
    given), or None if it is safe."""
    name = _name(entity_id, state)
    detail: list[str] = []
    if entity_id in marked:
        verb = "run" if domain in ("script", "automation") else service.replace("_", " ")
    elif _is_critical_kind(domain, state) and service not in SAFE_SERVICES[domain]:
        if domain == "cover" and service == "set_cover_position" and not _opens(data):
            return None
        verb = _VERBS.get((domain, service), service.replace("_", " "))
    elif domain in RELAY_DOMAINS and guarded_by(hass, entity_id) is not None:
        # Every service: a relay's "off" may be what opens (a momentary or inverted one).
        verb = service.replace("_", " ")
    elif (domain == "script" and service != "turn_off") or (
        domain == "automation" and service == "trigger"
    ):
        detail = _critical_entities_run_by(hass, domain, entity_id)
        if not detail:
            return None
        verb = "run"
    else:
        return None
    named_as = _NAMED_AS.get((domain, service), service)
    if words is not None and (worded := words.action(domain, named_as, name, detail)):
        return worded
    return f"{verb} {name} ({', '.join(detail)})" if detail else f"{verb} {name}"


def _is_critical_kind(domain: str, state: State | None) -> bool:
    """Locks, alarm panels, and covers of class garage, gate or door."""
    if domain == "cover":
        device_class = state.attributes.get("device_class") if state is not None else None
        return opens_into_home(device_class)
    return domain in SAFE_SERVICES


def _opens(data: dict[str, Any]) -> bool:
    """A position above 0 opens (an unreadable one may: asked rather than guessed)."""
    try:
        return float(data.get("position")) > 0  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True


def _critical_entities_run_by(hass: HomeAssistant, domain: str, entity_id: str) -> list[str]:
    """Locks, alarm panels, openable covers and their relays a script or automation
    refers to.

    Home Assistant's own index of what each script and automation references; steps that
    reach others through templates are still held when they run.
    """
    users_of = scripts_with_entity if domain == "script" else automations_with_entity
    if domain not in hass.config.components:
        return []
    touched: list[str] = []
    for state in hass.states.async_all(tuple(SAFE_SERVICES)):
        if _is_critical_kind(state.domain, state) and entity_id in users_of(hass, state.entity_id):
            touched.append(state.name)
    # Relays beside a lock, alarm panel or openable cover (critical_devices.py), from
    # what this one script or automation refers to.
    used_by = entities_in_script if domain == "script" else entities_in_automation
    for used in sorted(used_by(hass, entity_id)):
        if used.split(".", 1)[0] in RELAY_DOMAINS and guarded_by(hass, used) is not None:
            state = hass.states.get(used)
            touched.append(_name(used, state))
    return touched
