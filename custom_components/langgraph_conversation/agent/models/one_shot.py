"""A one-shot model call for tasks (Home Assistant's AI Task): no thread, no tools.

A task takes the model path of a conversation turn (model_call.py: retries before the
first word, then the fallback model), tells the same turn hooks (activity events: start,
error, end with the model that answered and its tokens) and fails with the same
TurnError, so the entity shows the sentence a failed turn shows. Structured data is asked
for as JSON (the provider's JSON mode where LiteLLM knows it has one) and checked by the
caller; an invalid answer is asked for once more, told what was wrong.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
import functools
import json
import logging
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable

from ..errors import TurnError
from ..events import MessageStarted, ModelCallFinished
from ..guard import clean_text
from ..hooks import TurnHooks, TurnRecorder
from .access import ModelAccess, ModelSettings
from .answer import AnswerLimitExceeded, answer_deadline, cached_input_tokens
from .chat import needs_litellm
from .error_kinds import to_model_error
from .model_call import AnsweringModels, stream_with_fallback
from .ollama import bounded_settings
from .role_accesses import RoleAccesses
from .roles import ModelCache, RoleModel, RoleModels

_LOGGER = logging.getLogger(__name__)

# Attempts at a structured answer: the first, and one retry told what was wrong.
STRUCTURE_ATTEMPTS = 2
# Longest description of what was wrong, in the retry and in the error.
ERROR_DETAIL_CHARS = 300
# TurnError kind (and activity error) of structured data still invalid after the retry.
INVALID_STRUCTURE = "invalid_structure"

JSON_INSTRUCTIONS = (
    "Answer with only one JSON object, no other text and no code fences. "
    "It must match this JSON schema:\n{schema}"
)
RETRY_INSTRUCTIONS = (
    "That answer was not valid: {error}. Answer again with only the JSON object, "
    "matching the JSON schema given before."
)


class InvalidAnswer(Exception):
    """The answer is not the data asked for; the text says why (sent to the model)."""


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What LiteLLM knows of a model; `vision` is None when it does not know."""

    vision: bool | None
    json_mode: bool


@functools.cache
def model_capabilities(model: str) -> Capabilities:
    """Look a LiteLLM model string up in LiteLLM's model map.

    Blocking on first use (LiteLLM may read its map from a file): call it in an
    executor. Cached: the map does not change while Home Assistant runs.
    """
    if not needs_litellm(model):
        # Ollama's native API (ollama_chat.py): it takes a JSON `format`; whether a model
        # sees images only Ollama knows.
        return Capabilities(vision=None, json_mode=True)
    from .library import litellm  # in the executor, as documented above

    vision: bool | None = None
    try:
        info = litellm.get_model_info(model=model)
    except Exception:  # noqa: BLE001  unknown models (self-hosted ones) raise
        info = None
    if info is not None and info.get("supports_vision") is not None:
        vision = bool(info["supports_vision"])
    provider, _, name = model.partition("/")
    try:
        params = litellm.get_supported_openai_params(
            model=name or provider, custom_llm_provider=provider
        )
    except Exception:  # noqa: BLE001  an unknown provider: ask for nothing special
        params = None
    return Capabilities(vision=vision, json_mode="response_format" in (params or ()))


def parse_json_answer(text: str) -> Any:
    """The JSON in a model's answer, tolerating code fences and words around an object."""
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0].strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            return json.loads(text[start : end + 1])
        raise


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """One task: what to ask, and which models answer how."""

    # The instructions of the system message (Home Assistant's AI Task prompt).
    system_prompt: str
    # The task's instructions: text, or content blocks (text and images).
    content: str | list[str | dict[str, Any]]
    settings: ModelSettings
    # The fallback model (the fast role is not used: a task is one call).
    roles: RoleAccesses = field(default_factory=RoleAccesses)
    # Extra attempts of a model call that failed before its first word.
    model_retries: int = 0
    # The JSON schema of the data asked for; None asks for text.
    schema: dict[str, Any] | None = None
    # For the hooks: what the task asked (its instructions), and what ties its reports
    # together (the conversation id), as a turn's request and thread.
    request_text: str = ""
    label: str = ""


async def run_task(
    access: ModelAccess,
    models: ModelCache,
    request: TaskRequest,
    *,
    hooks: Sequence[TurnHooks] = (),
    check: Callable[[Any], Any] | None = None,
    on_answer: Callable[[str], None] | None = None,
) -> Any:
    """Run a task: the text answered, or with a schema, the data `check` made of it.

    `check` gets the parsed JSON and returns the data, raising InvalidAnswer when it does
    not match. `on_answer` sees every answer's text, also an invalid one. A failed
    model call raises TurnError (kind as a turn's: a ModelErrorKind value, "empty_answer",
    "answer_too_long"...); data still invalid after the retry raises InvalidAnswer.
    """
    recorder = TurnRecorder(hooks, request.label, request.request_text)
    await recorder.start(access.model)
    error: str | None = "cancelled"
    try:
        result = await _answer(access, models, request, recorder, check, on_answer)
        error = None
        return result
    except TurnError as err:
        error = err.kind
        await recorder.fail(err.kind, err.detail)
        raise
    except InvalidAnswer as err:
        error = INVALID_STRUCTURE
        await recorder.fail(INVALID_STRUCTURE, str(err))
        raise
    finally:
        await recorder.end(error)


async def _answer(
    access: ModelAccess,
    models: ModelCache,
    request: TaskRequest,
    recorder: TurnRecorder,
    check: Callable[[Any], Any] | None,
    on_answer: Callable[[str], None] | None,
) -> Any:
    settings = await bounded_settings(access, request.settings)
    answering = await _answering_models(
        models.roles(access, request.roles, settings), json_mode=request.schema is not None
    )
    messages = _messages(request)
    problem = ""
    for attempt in range(STRUCTURE_ATTEMPTS if request.schema is not None else 1):
        text = await _ask(access, answering, messages, request, recorder)
        if on_answer is not None:
            on_answer(text)
        if request.schema is None:
            if not text.strip():
                raise TurnError("empty_answer", "the model returned no text")
            return text
        try:
            parsed = parse_json_answer(text)
            return check(parsed) if check is not None else parsed
        except (json.JSONDecodeError, InvalidAnswer) as err:
            problem = str(err)[:ERROR_DETAIL_CHARS] or type(err).__name__
            _LOGGER.debug("Answer %d of a task is invalid: %s", attempt + 1, problem)
            messages += [
                AIMessage(content=text),
                HumanMessage(content=RETRY_INSTRUCTIONS.format(error=problem)),
            ]
    raise InvalidAnswer(problem)


async def _answering_models(
    roles: RoleModels, *, json_mode: bool
) -> list[tuple[RoleModel | None, Runnable]]:
    """The main model, then the fallback; asked for JSON where the provider has a mode."""
    chosen: list[RoleModel] = [roles.main, *([roles.fallback] if roles.fallback else [])]
    answering: list[tuple[RoleModel | None, Runnable]] = []
    loop = asyncio.get_running_loop()
    for role_model in chosen:
        model: Runnable = role_model.model
        if json_mode:
            capabilities = await loop.run_in_executor(None, model_capabilities, role_model.name)
            if capabilities.json_mode:
                model = model.bind(response_format={"type": "json_object"})
        answering.append((role_model, model))
    return answering


def _messages(request: TaskRequest) -> list[BaseMessage]:
    """System message (with the schema when data is asked for), then the instructions.

    Text is cleaned as a turn's is: the provider's HTTP client refuses invalid Unicode.
    """
    system = request.system_prompt
    if request.schema is not None:
        system = f"{system}\n\n{JSON_INSTRUCTIONS.format(schema=json.dumps(request.schema))}"
    content = request.content
    return [
        SystemMessage(content=clean_text(system)),
        HumanMessage(content=clean_text(content) if isinstance(content, str) else content),
    ]


async def _ask(
    access: ModelAccess,
    answering: AnsweringModels,
    messages: list[BaseMessage],
    request: TaskRequest,
    recorder: TurnRecorder,
) -> str:
    """One answer on the turns' model path; its events go to the hooks."""
    events: list[Any] = [MessageStarted()]
    try:
        answer, answered_by = await stream_with_fallback(
            answering,
            messages,
            events.append,
            retries=request.model_retries,
            deadline=answer_deadline(request.settings.request_timeout),
        )
    except AnswerLimitExceeded as err:
        raise TurnError(err.kind, err.detail) from None
    except Exception as err:  # noqa: BLE001  every failure becomes a redacted TurnError
        model_error = to_model_error(err, access)
        raise TurnError(model_error.kind.value, model_error.detail) from None
    usage = answer.usage_metadata
    role = answered_by.role if answered_by is not None else "main"
    events.append(
        ModelCallFinished(
            role=str(role),
            model=answered_by.name if answered_by is not None else access.model,
            input_tokens=usage["input_tokens"] if usage else 0,
            output_tokens=usage["output_tokens"] if usage else 0,
            cached_input_tokens=cached_input_tokens(usage),
        )
    )
    for event in events:
        await recorder.see(event)
    message = answer.message(with_tools=False)
    return str(message.text) if message is not None else ""
