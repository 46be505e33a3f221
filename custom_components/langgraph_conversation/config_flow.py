"""Config flow: model access (entry), its storage options, and its agents (subentries)."""

from __future__ import annotations

from collections.abc import Mapping
import logging
from typing import Any

import voluptuous as vol

from homeassistant.config_entries import (
    ConfigEntry,
    ConfigEntryState,
    ConfigFlow,
    ConfigFlowResult,
    ConfigSubentryFlow,
    OptionsFlow,
    SubentryFlowResult,
)
from homeassistant.core import HomeAssistant, callback
from homeassistant.data_entry_flow import section
from homeassistant.helpers import llm
from homeassistant.helpers.httpx_client import get_async_client
from homeassistant.helpers.selector import (
    BooleanSelector,
    EntitySelector,
    EntitySelectorConfig,
    NumberSelector,
    NumberSelectorConfig,
    NumberSelectorMode,
    SelectOptionDict,
    SelectSelector,
    SelectSelectorConfig,
    SelectSelectorMode,
    TemplateSelector,
    TextSelector,
    TextSelectorConfig,
    TextSelectorType,
)

from .agent.errors import ModelError, ModelErrorKind
from .agent.graph import AgentKind
from .agent.models import ModelAccess, async_list_models, provider_of
from .const import (
    CHECKPOINTS_KEPT_PER_THREAD,
    CONF_ACTIVITY_CONTENTS,
    CONF_AGENT_KIND,
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_AUTOMATIONS,
    CONF_AUTOMATIONS_CRITICAL,
    CONF_BASE_PROMPT,
    CONF_CAMERAS,
    CONF_CHECKPOINTS_KEPT,
    CONF_COMPACT_CONTEXT,
    CONF_CONFIRM_ENTITIES,
    CONF_CONTEXT_WINDOW,
    CONF_CONTINUE_MINUTES,
    CONF_CONTINUE_TEXT,
    CONF_EMBEDDING_API_BASE,
    CONF_EMBEDDING_API_KEY,
    CONF_EMBEDDING_MODEL,
    CONF_FALLBACK_MODEL,
    CONF_FAST_MODEL,
    CONF_HISTORY_BUDGET,
    CONF_IMAGE_FALLBACK_MODEL,
    CONF_IMAGE_MODEL,
    CONF_KEEP_ALIVE,
    CONF_LEARN_MEMORIES,
    CONF_LLM_HASS_API,
    CONF_MAX_TOKENS,
    CONF_MAX_TOOL_ROUNDS,
    CONF_MEMORY,
    CONF_MODEL,
    CONF_MODEL_RETRIES,
    CONF_POSTGRES_URL,
    CONF_PROMPT,
    CONF_REQUEST_TIMEOUT,
    CONF_SAFETY_CHECK,
    CONF_SEARCH_KNOWLEDGE,
    CONF_STORAGE,
    CONF_TEMPERATURE,
    CONF_THINK,
    CONF_THREAD_IDLE_DAYS,
    CONF_TOOL_CATEGORIES,
    CONF_VISION_MODEL,
    CONF_WEB_SEARCH,
    CONF_WEB_SEARCH_MODEL,
    DEFAULT_AI_TASK_NAME,
    DEFAULT_AI_TASK_TEMPERATURE,
    DEFAULT_CONVERSATION_NAME,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MODEL_RETRIES,
    DEFAULT_REQUEST_TIMEOUT,
    DOMAIN,
    MAX_CHECKPOINTS_KEPT,
    MAX_CONTEXT_WINDOW,
    MAX_KEEP_ALIVE,
    MAX_THREAD_IDLE_DAYS,
    MIN_CONTEXT_WINDOW,
    STORAGE_POSTGRES,
    STORAGE_SQLITE,
    SUBENTRY_AI_TASK,
    SUBENTRY_CONVERSATION,
    THINK_DEFAULT,
    THINK_OFF,
    THINK_ON,
    THREAD_IDLE_DAYS,
    VALIDATION_TIMEOUT,
)
from .form_sections import flattened, grouped, nested
from .postgres_packages import PostgresInstallSkipped, PostgresNotInstalled, async_load_postgres
from .profile import AGENT_DEFAULTS, NEW_AGENT_OPTIONS, OLLAMA_AGENT_DEFAULTS
from .stack import async_load_modules
from .tools import labelled, suggested_confirm_entities

_LOGGER = logging.getLogger(__name__)

# Flow error keys (translated in strings.json) per kind of failed validation request.
_FLOW_ERRORS: dict[ModelErrorKind, str] = {
    ModelErrorKind.MISSING_KEY: "missing_key",
    ModelErrorKind.AUTH: "invalid_auth",
    ModelErrorKind.MODEL_NOT_FOUND: "model_not_found",
    ModelErrorKind.BAD_REQUEST: "model_not_found",
    ModelErrorKind.CONNECTION: "cannot_connect",
    ModelErrorKind.TIMEOUT: "cannot_connect",
    ModelErrorKind.SERVER: "server_error",
    ModelErrorKind.RATE_LIMIT: "rate_limited",
}

# What the log says happened, per kind: only what is known (a refused key is not an
# unreachable server, and a missing key never left this machine).
_LOG_REASONS: dict[ModelErrorKind, str] = {
    ModelErrorKind.MISSING_KEY: "no API key was given and the provider needs one (not sent)",
    ModelErrorKind.AUTH: "the provider refused the API key",
    ModelErrorKind.MODEL_NOT_FOUND: "the provider does not know the model",
    ModelErrorKind.BAD_REQUEST: "the provider rejected the request",
    ModelErrorKind.CONNECTION: "could not reach the model's server",
    ModelErrorKind.TIMEOUT: "the model's server did not answer in time",
    ModelErrorKind.SERVER: "the model's server answered with an error",
    ModelErrorKind.RATE_LIMIT: "the provider refused for rate limit or quota",
}


def _access_schema(models: list[str]) -> vol.Schema:
    """Model access: a picker of the server's models when it listed some, else free text.

    The picker still takes any typed LiteLLM model string (custom_value).
    """
    model_selector: TextSelector | SelectSelector = TextSelector()
    if models:
        model_selector = SelectSelector(
            SelectSelectorConfig(
                options=models, custom_value=True, mode=SelectSelectorMode.DROPDOWN, sort=True
            )
        )
    return vol.Schema(
        {
            vol.Required(CONF_MODEL): model_selector,
            vol.Optional(CONF_API_KEY): TextSelector(
                TextSelectorConfig(type=TextSelectorType.PASSWORD)
            ),
            vol.Optional(CONF_API_BASE): TextSelector(
                TextSelectorConfig(type=TextSelectorType.URL)
            ),
        }
    )


ACCESS_SCHEMA = _access_schema([])

# A new agent's options (profile.py holds every agent option's default).
DEFAULT_AGENT_OPTIONS: dict[str, Any] = dict(NEW_AGENT_OPTIONS)

DEFAULT_AI_TASK_OPTIONS: dict[str, Any] = {
    CONF_TEMPERATURE: DEFAULT_AI_TASK_TEMPERATURE,
    CONF_MAX_TOKENS: DEFAULT_MAX_TOKENS,
    CONF_REQUEST_TIMEOUT: DEFAULT_REQUEST_TIMEOUT,
    CONF_MODEL_RETRIES: DEFAULT_MODEL_RETRIES,
    CONF_ACTIVITY_CONTENTS: False,
}


def _clean_access(user_input: Mapping[str, Any]) -> dict[str, Any]:
    """Trimmed entry data without empty optional fields."""
    data = {CONF_MODEL: user_input[CONF_MODEL].strip()}
    for key in (CONF_API_KEY, CONF_API_BASE):
        if value := (user_input.get(key) or "").strip():
            data[key] = value
    return data


def _access(data: Mapping[str, Any]) -> ModelAccess:
    return ModelAccess(data[CONF_MODEL], data.get(CONF_API_KEY), data.get(CONF_API_BASE))


async def _validation_error(hass: HomeAssistant, data: Mapping[str, Any]) -> str | None:
    """Make the one real request; the flow error key, or None when it worked."""
    access = _access(data)
    # The first check may run before any entry's stack was loaded: the agent's libraries,
    # and LiteLLM's lazy imports for this provider (and its SDK's), load in the executor,
    # not on the event loop. A model string LiteLLM cannot place fails here too; the check
    # below then says why.
    await async_load_modules(hass)
    from .agent.models import async_check_access, warm_up_once  # loaded just now

    try:
        await hass.async_add_executor_job(warm_up_once, access)
    except Exception as err:  # noqa: BLE001  reported by the real check that follows
        _LOGGER.debug("Warming up for %s failed: %s", access.model, access.redact(str(err)))
    try:
        await async_check_access(access, VALIDATION_TIMEOUT)
    except ModelError as err:
        reason = _LOG_REASONS.get(err.kind, "unexpected error")
        _LOGGER.info("Checking model %s failed, %s: %s", access.model, reason, err.detail)
        return _FLOW_ERRORS.get(err.kind, "unknown")
    return None


async def _server_models(hass: HomeAssistant, data: Mapping[str, Any] | None) -> list[str]:
    """The models the server of `data` lists (with its provider prefix); [] if it cannot."""
    if not data or not data.get(CONF_MODEL):
        return []
    return await async_list_models(get_async_client(hass), _access(data))


class LangGraphConversationConfigFlow(ConfigFlow, domain=DOMAIN):
    """Step "Model access": which LiteLLM model, with which key and base URL."""

    VERSION = 1
    # 2: Ollama agents no longer store the old defaults (__init__.async_migrate_entry).
    MINOR_VERSION = 2

    async def async_step_user(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        """Ask for the model and check it answers."""
        errors: dict[str, str] = {}
        if user_input is not None:
            data = _clean_access(user_input)
            if self._is_duplicate(data):
                return self.async_abort(reason="already_configured")
            if not (error := await _validation_error(self.hass, data)):
                return self.async_create_entry(
                    title=data[CONF_MODEL],
                    data=data,
                    subentries=[
                        {
                            "subentry_type": SUBENTRY_CONVERSATION,
                            "data": DEFAULT_AGENT_OPTIONS,
                            "title": DEFAULT_CONVERSATION_NAME,
                            "unique_id": None,
                        },
                        {
                            "subentry_type": SUBENTRY_AI_TASK,
                            "data": DEFAULT_AI_TASK_OPTIONS,
                            "title": DEFAULT_AI_TASK_NAME,
                            "unique_id": None,
                        },
                    ],
                )
            errors["base"] = error
            # Whatever went wrong, the server may list what it has: offer that to pick from.
            schema = _access_schema(await _server_models(self.hass, data))
        else:
            schema = ACCESS_SCHEMA
        return self.async_show_form(
            step_id="user",
            data_schema=self.add_suggested_values_to_schema(schema, user_input),
            errors=errors,
        )

    def _is_duplicate(self, data: Mapping[str, Any], *, besides: str | None = None) -> bool:
        """Same model at the same base URL (a missing base equals a missing base), in an
        entry other than `besides` (an entry id)."""
        key = (data[CONF_MODEL], data.get(CONF_API_BASE))
        return any(
            (entry.data.get(CONF_MODEL), entry.data.get(CONF_API_BASE)) == key
            for entry in self._async_current_entries(include_ignore=False)
            if entry.entry_id != besides
        )

    async def async_step_reconfigure(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Change the model, key or base URL; checked with one real request, then reloaded.

        The agents and their threads stay: they belong to the entry, not to the model.
        """
        entry = self._get_reconfigure_entry()
        errors: dict[str, str] = {}
        if user_input is not None:
            data = _clean_access(user_input)
            if self._is_duplicate(data, besides=entry.entry_id):
                return self.async_abort(reason="already_configured")
            if not (error := await _validation_error(self.hass, data)):
                # The title names the model unless the user renamed the entry.
                renamed = entry.title != entry.data.get(CONF_MODEL)
                # Not async_update_reload_and_abort: the entry's own update listener
                # reloads it on any change (Home Assistant 2026.10 reports an integration
                # that has one and reloads from the flow too). Unchanged data: no reload.
                return self.async_update_and_abort(
                    entry,
                    data=data,
                    title=entry.title if renamed else data[CONF_MODEL],
                )
            errors["base"] = error
            shown: Mapping[str, Any] = user_input
            models = await _server_models(self.hass, data)
        else:
            shown = entry.data
            models = await _server_models(self.hass, entry.data)
        return self.async_show_form(
            step_id="reconfigure",
            data_schema=self.add_suggested_values_to_schema(_access_schema(models), shown),
            errors=errors,
        )

    async def async_step_reauth(self, entry_data: Mapping[str, Any]) -> ConfigFlowResult:
        """The model refused the key; ask for a new one."""
        return await self.async_step_reauth_confirm()

    async def async_step_reauth_confirm(
        self, user_input: dict[str, Any] | None = None
    ) -> ConfigFlowResult:
        """Check the new key against the same model, then reload the entry."""
        entry = self._get_reauth_entry()
        errors: dict[str, str] = {}
        if user_input is not None:
            data = {**entry.data, CONF_API_KEY: (user_input.get(CONF_API_KEY) or "").strip()}
            if not data[CONF_API_KEY]:
                data.pop(CONF_API_KEY)
            if not (error := await _validation_error(self.hass, data)):
                # The entry's update listener reloads it (see async_step_reconfigure).
                return self.async_update_and_abort(entry, data=data)
            errors["base"] = error
        return self.async_show_form(
            step_id="reauth_confirm",
            data_schema=vol.Schema(
                {
                    vol.Optional(CONF_API_KEY): TextSelector(
                        TextSelectorConfig(type=TextSelectorType.PASSWORD)
                    )
                }
            ),
            description_placeholders={"model": entry.data[CONF_MODEL]},
            errors=errors,
        )

    @staticmethod
    @callback
    def async_get_options_flow(config_entry: ConfigEntry) -> OptionsFlow:
        """ "Configure": retention of conversations and the embedding model of memories."""
        return StorageOptionsFlow()

    @classmethod
    @callback
    def async_get_supported_subentry_types(
        cls, config_entry: ConfigEntry
    ) -> dict[str, type[ConfigSubentryFlow]]:
        """Agents are subentries of the model access entry."""
        return {SUBENTRY_CONVERSATION: AgentSubentryFlow, SUBENTRY_AI_TASK: AITaskSubentryFlow}


# A model for one role of an agent (fast, fallback); see agent/models/roles.py for which key
# it gets when it names none.
_ROLE_SCHEMA = vol.Schema(
    {
        vol.Optional(CONF_MODEL): TextSelector(),
        vol.Optional(CONF_API_KEY): TextSelector(
            TextSelectorConfig(type=TextSelectorType.PASSWORD)
        ),
        vol.Optional(CONF_API_BASE): TextSelector(TextSelectorConfig(type=TextSelectorType.URL)),
    }
)


def _role_options(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A role section as stored: trimmed, without empty fields; None without a model."""
    cleaned = {
        key: value
        for key in (CONF_MODEL, CONF_API_KEY, CONF_API_BASE)
        if (value := str((values or {}).get(key) or "").strip())
    }
    return cleaned if CONF_MODEL in cleaned else None


def _agent_option(key: str, defaults: Mapping[str, Any] = AGENT_DEFAULTS) -> vol.Optional:
    """An agent form field whose default is the option's default (profile.py); without
    one (None: the model's own) the field left empty stores nothing."""
    if defaults[key] is None:
        return vol.Optional(key)
    return vol.Optional(key, default=defaults[key])


def _ollama_fields() -> dict[Any, Any]:
    """The options of Ollama's native API (`ollama_chat/` models), as Home Assistant's
    own Ollama agent has them; other providers never receive them."""
    return {
        _agent_option(CONF_CONTEXT_WINDOW): NumberSelector(
            NumberSelectorConfig(
                min=MIN_CONTEXT_WINDOW,
                max=MAX_CONTEXT_WINDOW,
                step=1,
                mode=NumberSelectorMode.BOX,
            )
        ),
        _agent_option(CONF_KEEP_ALIVE): NumberSelector(
            NumberSelectorConfig(
                min=-1,
                max=MAX_KEEP_ALIVE,
                step=1,
                unit_of_measurement="s",
                mode=NumberSelectorMode.BOX,
            )
        ),
        _agent_option(CONF_THINK): SelectSelector(
            SelectSelectorConfig(
                options=[THINK_DEFAULT, THINK_ON, THINK_OFF],
                mode=SelectSelectorMode.DROPDOWN,
                translation_key=CONF_THINK,
            )
        ),
    }


def free_name(hass: HomeAssistant, subentry_type: str, base: str) -> str:
    """`base`, or "`base` 2", "`base` 3"...: the first no agent of this kind is called.

    Every entry's subentries count: an entity is named after its subentry, and a second
    "LangGraph Conversation" anywhere would become conversation.langgraph_conversation_2.
    """
    taken = {
        subentry.title.casefold()
        for entry in hass.config_entries.async_entries(DOMAIN)
        for subentry in entry.subentries.values()
        if subentry.subentry_type == subentry_type
    }
    name, number = base, 1
    while name.casefold() in taken:
        number += 1
        name = f"{base} {number}"
    return name


def tool_categories() -> list[str]:
    """The tool groups an agent may choose (the agent's flow has loaded the stack)."""
    from .tools import TOOLS

    return TOOLS.categories


def _agent_schema(hass: HomeAssistant, is_new: bool, native_ollama: bool = False) -> vol.Schema:
    apis = [SelectOptionDict(label=api.name, value=api.id) for api in llm.async_get_apis(hass)]
    defaults = OLLAMA_AGENT_DEFAULTS if native_ollama else AGENT_DEFAULTS
    fields: dict[Any, Any] = {}
    if is_new:
        name = free_name(hass, SUBENTRY_CONVERSATION, DEFAULT_CONVERSATION_NAME)
        fields[vol.Required("name", default=name)] = TextSelector()
    fields.update(
        {
            vol.Optional(CONF_PROMPT): TemplateSelector(),
            # One form for every kind (a form cannot change with a choice made in it):
            # the chatbot and rag kinds ignore the tool options, the descriptions say so.
            _agent_option(CONF_AGENT_KIND): SelectSelector(
                SelectSelectorConfig(
                    options=[kind.value for kind in AgentKind],
                    mode=SelectSelectorMode.LIST,
                    translation_key=CONF_AGENT_KIND,
                )
            ),
            vol.Optional(CONF_BASE_PROMPT): TextSelector(TextSelectorConfig(multiline=True)),
            _agent_option(CONF_SEARCH_KNOWLEDGE): BooleanSelector(),
            vol.Optional(CONF_LLM_HASS_API): SelectSelector(
                SelectSelectorConfig(options=apis, multiple=True)
            ),
            vol.Optional(CONF_TOOL_CATEGORIES): SelectSelector(
                SelectSelectorConfig(
                    options=tool_categories(),
                    multiple=True,
                    translation_key=CONF_TOOL_CATEGORIES,
                )
            ),
            # Unlocking, disarming and opening garage doors, gates and doors always ask;
            # these are the user's own additions (scripts, buttons, switches, ...).
            vol.Optional(CONF_CONFIRM_ENTITIES): EntitySelector(
                EntitySelectorConfig(multiple=True)
            ),
            _agent_option(CONF_SAFETY_CHECK): BooleanSelector(),
            _agent_option(CONF_COMPACT_CONTEXT): BooleanSelector(),
            _agent_option(CONF_MEMORY): BooleanSelector(),
            _agent_option(CONF_LEARN_MEMORIES): BooleanSelector(),
            _agent_option(CONF_CONTINUE_MINUTES): NumberSelector(
                NumberSelectorConfig(
                    min=0, max=120, step=1, unit_of_measurement="min", mode=NumberSelectorMode.BOX
                )
            ),
            _agent_option(CONF_CONTINUE_TEXT): BooleanSelector(),
            _agent_option(CONF_HISTORY_BUDGET): NumberSelector(
                NumberSelectorConfig(min=0, max=200000, step=100, mode=NumberSelectorMode.BOX)
            ),
            _agent_option(CONF_TEMPERATURE, defaults): NumberSelector(
                NumberSelectorConfig(min=0, max=2, step=0.05, mode=NumberSelectorMode.SLIDER)
            ),
            _agent_option(CONF_MAX_TOKENS, defaults): NumberSelector(
                NumberSelectorConfig(min=16, max=65536, step=1, mode=NumberSelectorMode.BOX)
            ),
            _agent_option(CONF_MAX_TOOL_ROUNDS): NumberSelector(
                NumberSelectorConfig(min=1, max=30, step=1, mode=NumberSelectorMode.BOX)
            ),
            _agent_option(CONF_MODEL_RETRIES): NumberSelector(
                NumberSelectorConfig(min=0, max=5, step=1, mode=NumberSelectorMode.BOX)
            ),
            **(_ollama_fields() if native_ollama else {}),
            vol.Optional(CONF_FAST_MODEL): section(_ROLE_SCHEMA, {"collapsed": True}),
            vol.Optional(CONF_FALLBACK_MODEL): section(_ROLE_SCHEMA, {"collapsed": True}),
            # Camera questions: off by default; the vision model looks when the agent's
            # own model cannot see images (or when the owner wants images to go there).
            _agent_option(CONF_CAMERAS): BooleanSelector(),
            vol.Optional(CONF_VISION_MODEL): section(_ROLE_SCHEMA, {"collapsed": True}),
            **_web_search_fields(),
            **_automation_fields(),
            _agent_option(CONF_ACTIVITY_CONTENTS): BooleanSelector(),
            _agent_option(CONF_REQUEST_TIMEOUT): NumberSelector(
                NumberSelectorConfig(
                    min=5, max=600, step=1, unit_of_measurement="s", mode=NumberSelectorMode.BOX
                )
            ),
        }
    )
    return vol.Schema(grouped(fields))


def _web_search_fields() -> dict[Any, Any]:
    """Web search: off by default; a web search model for agents whose own cannot search."""
    return {
        _agent_option(CONF_WEB_SEARCH): BooleanSelector(),
        vol.Optional(CONF_WEB_SEARCH_MODEL): section(_ROLE_SCHEMA, {"collapsed": True}),
    }


def _automation_fields() -> dict[Any, Any]:
    """Automations by voice: off by default; critical actions in them need the second,
    explicit option."""
    return {
        _agent_option(CONF_AUTOMATIONS): BooleanSelector(),
        _agent_option(CONF_AUTOMATIONS_CRITICAL): BooleanSelector(),
    }


def _agent_options(hass: HomeAssistant, user_input: dict[str, Any]) -> dict[str, Any]:
    """Stored options (flat, whatever section of the form they came from): whole numbers
    as ints, only API ids that still exist, no blank base prompt (blank means the kind's
    own)."""
    options = {k: v for k, v in flattened(user_input).items() if k != "name"}
    if not (options.get(CONF_BASE_PROMPT) or "").strip():
        options.pop(CONF_BASE_PROMPT, None)
    known = {api.id for api in llm.async_get_apis(hass)}
    if apis := [api for api in options.get(CONF_LLM_HASS_API) or [] if api in known]:
        options[CONF_LLM_HASS_API] = apis
    else:
        options.pop(CONF_LLM_HASS_API, None)
    for key in (
        CONF_MAX_TOKENS,
        CONF_MAX_TOOL_ROUNDS,
        CONF_REQUEST_TIMEOUT,
        CONF_HISTORY_BUDGET,
        CONF_CONTINUE_MINUTES,
        CONF_MODEL_RETRIES,
        CONF_CONTEXT_WINDOW,
        CONF_KEEP_ALIVE,
    ):
        if key in options:
            options[key] = int(options[key])
    for key in (CONF_FAST_MODEL, CONF_FALLBACK_MODEL, CONF_VISION_MODEL, CONF_WEB_SEARCH_MODEL):
        if role := _role_options(options.get(key)):
            options[key] = role
        else:
            options.pop(key, None)
    return options


class _OptionsSubentryFlow(ConfigSubentryFlow):
    """Create or reconfigure one subentry from a single options form."""

    # The options a new subentry's form suggests.
    defaults: dict[str, Any]

    def _schema(self, is_new: bool) -> vol.Schema:
        raise NotImplementedError  # abstract: each kind of subentry has its form

    def _options(self, user_input: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError  # abstract: each kind of subentry stores its options

    async def async_step_user(self, user_input: dict[str, Any] | None = None) -> SubentryFlowResult:
        """A new subentry."""
        return await self._async_step_options(user_input, is_new=True)

    async def async_step_reconfigure(
        self, user_input: dict[str, Any] | None = None
    ) -> SubentryFlowResult:
        """Change an existing subentry."""
        return await self._async_step_options(user_input, is_new=False)

    async def _async_step_options(
        self, user_input: dict[str, Any] | None, *, is_new: bool
    ) -> SubentryFlowResult:
        if self._get_entry().state != ConfigEntryState.LOADED:
            return self.async_abort(reason="entry_not_loaded")
        if user_input is not None:
            options = self._options(user_input)
            if is_new:
                return self.async_create_entry(title=user_input["name"], data=options)
            return self.async_update_and_abort(
                self._get_entry(), self._get_reconfigure_subentry(), data=options
            )
        suggested = self.defaults if is_new else dict(self._get_reconfigure_subentry().data)
        return self.async_show_form(
            step_id="user" if is_new else "reconfigure",
            data_schema=self.add_suggested_values_to_schema(
                self._schema(is_new), self._suggested(suggested, is_new)
            ),
            description_placeholders=self._placeholders(),
        )

    def _suggested(self, suggested: dict[str, Any], is_new: bool) -> dict[str, Any]:
        """The form's suggested values (a kind may add its own)."""
        return suggested

    def _placeholders(self) -> dict[str, str] | None:
        """The form's description placeholders (a kind may need some)."""
        return None


class AgentSubentryFlow(_OptionsSubentryFlow):
    """Create or reconfigure one conversation agent."""

    defaults = DEFAULT_AGENT_OPTIONS

    def _schema(self, is_new: bool) -> vol.Schema:
        native_ollama = provider_of(self._get_entry().data[CONF_MODEL]) == "ollama_chat"
        return _agent_schema(self.hass, is_new, native_ollama)

    def _options(self, user_input: dict[str, Any]) -> dict[str, Any]:
        return _agent_options(self.hass, user_input)

    # Critical by device (#27 part 4): buttons and switches that probably open the home
    # are suggested for "always needs my yes"; the user confirms them, and a saved
    # agent's own choice is never changed.
    def _suggested(self, suggested: dict[str, Any], is_new: bool) -> dict[str, Any]:
        if is_new and (found := suggested_confirm_entities(self.hass)):
            suggested = {**suggested, CONF_CONFIRM_ENTITIES: found}
        return nested(suggested)

    def _placeholders(self) -> dict[str, str] | None:
        found = labelled(self.hass, suggested_confirm_entities(self.hass))
        return {
            "confirm_suggestions": ", ".join(found) or "-",
            "search_model_status": self._search_model_status,
        }

    # Web search (#27): whether the agent's own model searches, by LiteLLM's model map
    # (read in the executor), said in the option's description.
    _search_model_status = ""

    async def _async_step_options(
        self, user_input: dict[str, Any] | None, *, is_new: bool
    ) -> SubentryFlowResult:
        # The tool groups and LiteLLM's model map are the stack's (loaded in the executor,
        # usually long since).
        await async_load_modules(self.hass)
        from .agent.models import searches  # loaded just now

        if user_input is None:
            model = self._get_entry().data[CONF_MODEL]
            # Words would be in the server's language, not the reader's (a flow does not
            # know the person's): the description, translated, explains the mark.
            self._search_model_status = f"{model} {'✔' if await searches(model) else '✘'}"
        return await super()._async_step_options(user_input, is_new=is_new)


def _ai_task_schema(hass: HomeAssistant, is_new: bool) -> vol.Schema:
    fields: dict[Any, Any] = {}
    if is_new:
        name = free_name(hass, SUBENTRY_AI_TASK, DEFAULT_AI_TASK_NAME)
        fields[vol.Required("name", default=name)] = TextSelector()
    fields.update(
        {
            vol.Optional(CONF_TEMPERATURE, default=DEFAULT_AI_TASK_TEMPERATURE): NumberSelector(
                NumberSelectorConfig(min=0, max=2, step=0.05, mode=NumberSelectorMode.SLIDER)
            ),
            vol.Optional(CONF_MAX_TOKENS, default=DEFAULT_MAX_TOKENS): NumberSelector(
                NumberSelectorConfig(min=16, max=65536, step=1, mode=NumberSelectorMode.BOX)
            ),
            vol.Optional(CONF_REQUEST_TIMEOUT, default=DEFAULT_REQUEST_TIMEOUT): NumberSelector(
                NumberSelectorConfig(
                    min=5, max=600, step=1, unit_of_measurement="s", mode=NumberSelectorMode.BOX
                )
            ),
            # A task takes the agents' model path: the same retries and fallback model.
            # No form defaults: a task saved before these options existed keeps none, and
            # ai_task.py reads the defaults (DEFAULT_AI_TASK_OPTIONS suggests them).
            vol.Optional(CONF_MODEL_RETRIES): NumberSelector(
                NumberSelectorConfig(min=0, max=5, step=1, mode=NumberSelectorMode.BOX)
            ),
            vol.Optional(CONF_FALLBACK_MODEL): section(_ROLE_SCHEMA, {"collapsed": True}),
            # Images (ai_task.generate_image): offered only with an image model.
            vol.Optional(CONF_IMAGE_MODEL): section(_ROLE_SCHEMA, {"collapsed": True}),
            vol.Optional(CONF_IMAGE_FALLBACK_MODEL): section(_ROLE_SCHEMA, {"collapsed": True}),
            vol.Optional(CONF_ACTIVITY_CONTENTS): BooleanSelector(),
        }
    )
    return vol.Schema(fields)


class AITaskSubentryFlow(_OptionsSubentryFlow):
    """Create or reconfigure one AI Task entity (generate_data with the entry's model)."""

    defaults = DEFAULT_AI_TASK_OPTIONS

    def _schema(self, is_new: bool) -> vol.Schema:
        return _ai_task_schema(self.hass, is_new)

    def _options(self, user_input: dict[str, Any]) -> dict[str, Any]:
        options = {k: v for k, v in user_input.items() if k != "name"}
        for key in (CONF_MAX_TOKENS, CONF_REQUEST_TIMEOUT, CONF_MODEL_RETRIES):
            if key in options:
                options[key] = int(options[key])
        for key in (CONF_FALLBACK_MODEL, CONF_IMAGE_MODEL, CONF_IMAGE_FALLBACK_MODEL):
            if role := _role_options(options.get(key)):
                options[key] = role
            else:
                options.pop(key, None)
        return options


STORAGE_SCHEMA = vol.Schema(
    {
        vol.Required(CONF_STORAGE, default=STORAGE_SQLITE): SelectSelector(
            SelectSelectorConfig(
                options=[STORAGE_SQLITE, STORAGE_POSTGRES],
                translation_key=CONF_STORAGE,
                mode=SelectSelectorMode.LIST,
            )
        ),
        # The URL usually holds a password: typed like one, never shown back in full.
        vol.Optional(CONF_POSTGRES_URL): TextSelector(
            TextSelectorConfig(type=TextSelectorType.PASSWORD)
        ),
        vol.Required(CONF_CHECKPOINTS_KEPT, default=CHECKPOINTS_KEPT_PER_THREAD): NumberSelector(
            NumberSelectorConfig(
                min=1, max=MAX_CHECKPOINTS_KEPT, step=1, mode=NumberSelectorMode.BOX
            )
        ),
        vol.Required(CONF_THREAD_IDLE_DAYS, default=THREAD_IDLE_DAYS): NumberSelector(
            NumberSelectorConfig(
                min=0,
                max=MAX_THREAD_IDLE_DAYS,
                step=1,
                unit_of_measurement="d",
                mode=NumberSelectorMode.BOX,
            )
        ),
        vol.Optional(CONF_EMBEDDING_MODEL): TextSelector(),
        vol.Optional(CONF_EMBEDDING_API_KEY): TextSelector(
            TextSelectorConfig(type=TextSelectorType.PASSWORD)
        ),
        vol.Optional(CONF_EMBEDDING_API_BASE): TextSelector(
            TextSelectorConfig(type=TextSelectorType.URL)
        ),
    }
)


def _storage_options(user_input: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """Whole numbers as ints, trimmed text, no empty optional fields; an empty URL field
    keeps the stored URL (the form never shows it back)."""
    options: dict[str, Any] = {
        CONF_CHECKPOINTS_KEPT: int(user_input[CONF_CHECKPOINTS_KEPT]),
        CONF_THREAD_IDLE_DAYS: int(user_input[CONF_THREAD_IDLE_DAYS]),
    }
    for key in (CONF_EMBEDDING_MODEL, CONF_EMBEDDING_API_KEY, CONF_EMBEDDING_API_BASE):
        if value := (user_input.get(key) or "").strip():
            options[key] = value
    # Only a PostgreSQL choice keeps a URL: a secret is not stored where it is not used.
    if user_input.get(CONF_STORAGE) == STORAGE_POSTGRES:
        options[CONF_STORAGE] = STORAGE_POSTGRES
        url = (user_input.get(CONF_POSTGRES_URL) or "").strip()
        options[CONF_POSTGRES_URL] = url or stored.get(CONF_POSTGRES_URL, "")
    return options


async def _postgres_error(hass: HomeAssistant, url: str) -> str | None:
    """Install PostgreSQL's packages if missing and connect once; the flow error key or None.

    Each failure has its own key (refused, password, database, rights, TLS). The log line
    never holds the URL's password (storage/postgres/ removes it from every message).
    """
    if not url:
        return "postgres_url_missing"
    try:
        postgres = await async_load_postgres(hass)
    except PostgresInstallSkipped as err:
        _LOGGER.error("PostgreSQL packages missing: %s", err)
        return "postgres_install_skipped"
    except PostgresNotInstalled as err:
        _LOGGER.error("Could not install the PostgreSQL packages: %s", err)
        return "postgres_install_failed"
    try:
        await postgres.check_connection(url)
    except postgres.PostgresUnavailable as err:
        _LOGGER.info("Could not use PostgreSQL (%s): %s", err.problem, err)
        return f"postgres_{err.problem}"
    return None


async def _embedding_error(
    hass: HomeAssistant, entry: ConfigEntry, options: Mapping[str, Any]
) -> str | None:
    """Embed one word with the chosen model; the flow error key, or None when it worked."""
    await async_load_modules(hass)
    from .agent.models import (  # loaded just now
        EmbeddingError,
        async_embed,
        embedding_access,
        warm_up_embeddings,
    )

    access = embedding_access(
        options[CONF_EMBEDDING_MODEL],
        options.get(CONF_EMBEDDING_API_KEY),
        options.get(CONF_EMBEDDING_API_BASE),
        chat=ModelAccess(
            entry.data[CONF_MODEL], entry.data.get(CONF_API_KEY), entry.data.get(CONF_API_BASE)
        ),
    )
    try:
        await hass.async_add_executor_job(warm_up_embeddings, access)
        await async_embed(access, ["Hello"], VALIDATION_TIMEOUT)
    except EmbeddingError as err:
        _LOGGER.info("Could not use embedding model %s: %s", access.model, err)
        return _FLOW_ERRORS.get(err.kind, "unknown")
    return None


class StorageOptionsFlow(OptionsFlow):
    """Options of a model access entry: where conversations and memories are kept (this
    machine's SQLite files or PostgreSQL), their retention and the embedding model.

    The storage files are shared by all entries; how differing options combine is
    described in persistence.py. Saving reloads the entry (its update listener).
    """

    async def async_step_init(self, user_input: dict[str, Any] | None = None) -> ConfigFlowResult:
        """One form; an embedding model is checked with one real request."""
        errors: dict[str, str] = {}
        if user_input is not None:
            options = _storage_options(user_input, self.config_entry.options)
            error = None
            if options.get(CONF_STORAGE) == STORAGE_POSTGRES:
                error = await _postgres_error(self.hass, options[CONF_POSTGRES_URL])
            if error is None and CONF_EMBEDDING_MODEL in options:
                error = await _embedding_error(self.hass, self.config_entry, options)
            if error is None:
                return self.async_create_entry(data=options)
            errors["base"] = error
        return self.async_show_form(
            step_id="init",
            data_schema=self.add_suggested_values_to_schema(
                STORAGE_SCHEMA,
                {
                    key: value
                    for key, value in (
                        user_input if user_input is not None else self.config_entry.options
                    ).items()
                    if key != CONF_POSTGRES_URL
                },
            ),
            errors=errors,
        )
