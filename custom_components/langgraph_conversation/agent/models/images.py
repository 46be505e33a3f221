"""Images from a prompt, through LiteLLM's image generation (Home Assistant's AI Task).

An image task takes the same path as a text task (one_shot.py) where it can: the image
model with the subentry's retries before anything came back, then the image fallback
model for failures another model may not have (rate limit, server error, dropped
connection, timeout), the turn hooks (activity: start, error, end with the model that
answered) and a TurnError of the usual kinds, so the entity shows the usual sentence.

What LiteLLM 1.83.0 reaches: OpenAI's `/v1/images/generations` (`openai/gpt-image-1`,
`openai/dall-e-3`, and any OpenAI-compatible image server with a base URL), Gemini's
Imagen models (`gemini/imagen-...`, the `:predict` endpoint) and Gemini's image models
(`gemini/gemini-2.5-flash-image...`, `:generateContent`), and the other providers it
lists for image generation. With reference images (the task's attachments) the call is
LiteLLM's image edit instead: OpenAI's `/v1/images/edits` (multipart, `gpt-image-1` takes
several images) or Gemini's image models (`:generateContent` with the images inline); a
model that cannot edit fails with its provider's refusal, told as usual. The image comes
back as base64 (asked for where the model takes `response_format`); a provider that answers
with a link gets it downloaded, bounded (image_bytes.py).

Retries are ours alone: for the `openai` provider LiteLLM would let the OpenAI SDK retry
twice on its own, so the call gets a client that does not (upstream/litellm_images.py),
on the HTTP client the caller passes in (Home Assistant's shared one). LiteLLM's HTTP
handler of the other providers does not retry.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
import functools
import logging
from typing import Any

import httpx

from ..errors import ModelErrorKind, TurnError
from ..events import ModelCallFinished
from ..guard import clean_text
from ..hooks import TurnHooks, TurnRecorder
from .access import ModelAccess, provider_of, same_place
from .client_users import SHARED_CLIENT_USERS
from .error_kinds import classify_error, is_retryable, retry_delay, to_model_error
from .image_bytes import MAX_IMAGE_BYTES, ImageProblem, download_image, image_facts, may_download
from .litellm_loading import async_litellm
from .role_accesses import role_access
from .roles import ModelRole, falls_back

_LOGGER = logging.getLogger(__name__)

# TurnError kind of an answer that holds no usable image (none, not an image, too large,
# a link that may not or could not be fetched).
INVALID_IMAGE = "invalid_image"
# Image models take longer than text models: a request gets at least this many seconds,
# whatever shorter timeout the subentry has for text.
MIN_IMAGE_TIMEOUT = 120.0
# Providers whose image calls LiteLLM hands to the OpenAI SDK's client (see above).
_OPENAI_SDK_PROVIDERS = frozenset({"openai"})


@dataclass(frozen=True, slots=True)
class ImageModels:
    """The image model of an AI Task, and the one that answers when it fails."""

    main: ModelAccess
    fallback: ModelAccess | None = None


def image_models(
    entry: ModelAccess,
    image: tuple[str | None, str | None, str | None],
    fallback: tuple[str | None, str | None, str | None] = (None, None, None),
) -> ImageModels | None:
    """The image models chosen as (model, key, base URL); None without an image model.

    Keys follow roles.py's rule: a model naming no key borrows the entry's key only where
    it goes to the same place. The fallback may also borrow the image model's key by the
    same rule (an OpenAI image model with its own key, and DALL-E 3 as its fallback).
    """
    main = role_access(entry, *image)
    if main is None:
        return None
    backup = role_access(entry, *fallback)
    own_base = (fallback[2] or "").strip() or None
    if backup is not None and backup.api_key is None and same_place(backup.model, own_base, main):
        backup = ModelAccess(backup.model, main.api_key, backup.api_base or main.api_base)
    return ImageModels(main, backup)


@dataclass(frozen=True, slots=True)
class ReferenceImage:
    """An image the new one is made from (an AI Task attachment)."""

    name: str
    data: bytes
    mime_type: str


@dataclass(frozen=True, slots=True)
class ImageRequest:
    """One image to make."""

    prompt: str
    models: ImageModels
    # Images to edit or combine; none: a new image from the prompt alone.
    references: tuple[ReferenceImage, ...] = ()
    # Extra attempts of the image model after a failure that may pass.
    retries: int = 0
    # Seconds one generation may take (raised to MIN_IMAGE_TIMEOUT).
    timeout: float = MIN_IMAGE_TIMEOUT
    # What ties the task's reports together (the conversation id), as a turn's thread.
    label: str = ""


@dataclass(frozen=True, slots=True)
class GeneratedImage:
    """The image made, and by whom."""

    data: bytes
    mime_type: str
    width: int | None
    height: int | None
    # The LiteLLM model string that answered, and its role ("main" or "fallback").
    model: str
    role: str
    # How the provider rewrote the prompt (DALL-E 3 does), if it says.
    revised_prompt: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0


async def generate_image(
    request: ImageRequest,
    *,
    http_client: httpx.AsyncClient,
    hooks: Sequence[TurnHooks] = (),
) -> GeneratedImage:
    """Make the image; TurnError (a ModelErrorKind value, or INVALID_IMAGE) if it fails.

    `http_client` carries the OpenAI SDK's requests and downloads of linked images.
    """
    recorder = TurnRecorder(hooks, request.label, request.prompt)
    await recorder.start(request.models.main.model)
    error: str | None = "cancelled"
    try:
        image = await _with_fallback(request, http_client)
        await recorder.see(
            ModelCallFinished(
                role=image.role,
                model=image.model,
                input_tokens=image.input_tokens,
                output_tokens=image.output_tokens,
            )
        )
        error = None
        return image
    except TurnError as err:
        error = err.kind
        await recorder.fail(err.kind, err.detail)
        raise
    finally:
        await recorder.end(error)


async def _with_fallback(request: ImageRequest, http_client: httpx.AsyncClient) -> GeneratedImage:
    """The image model with its retries, then the fallback, by model_call.py's rules."""
    chosen = [(ModelRole.MAIN, request.models.main)]
    if request.models.fallback is not None:
        chosen.append((ModelRole.FALLBACK, request.models.fallback))
    for index, (role, access) in enumerate(chosen):
        attempts = (request.retries if index == 0 else 0) + 1
        for attempt in range(attempts):
            try:
                return await _generate_once(access, role, request, http_client)
            except ImageProblem as err:
                # The provider answered, with nothing usable: asking again is no cure.
                raise TurnError(INVALID_IMAGE, access.redact(str(err))) from None
            except Exception as err:  # noqa: BLE001  retried, passed on, or raised redacted
                if access.request_key is None and await asyncio.to_thread(_lacks_key, access):
                    # LiteLLM refused before sending: no key, none in the environment.
                    detail = access.redact(f"{type(err).__name__}: {err}")[:500]
                    raise TurnError(ModelErrorKind.MISSING_KEY.value, detail) from None
                if attempt < attempts - 1 and is_retryable(err):
                    delay = retry_delay(err, attempt)
                    _LOGGER.info(
                        "Image generation failed (%s), retrying in %.1f s",
                        classify_error(err),
                        delay,
                    )
                    await asyncio.sleep(delay)
                    continue
                if index == len(chosen) - 1 or not falls_back(err):
                    model_error = to_model_error(err, access)
                    raise TurnError(model_error.kind.value, model_error.detail) from None
                _LOGGER.warning(
                    "The image model failed (%s); the image fallback model %s answers",
                    classify_error(err),
                    chosen[index + 1][1].model,
                )
                break
    raise AssertionError("unreachable: the last model's failure is raised")


async def _generate_once(
    access: ModelAccess, role: ModelRole, request: ImageRequest, http_client: httpx.AsyncClient
) -> GeneratedImage:
    timeout = max(float(request.timeout), MIN_IMAGE_TIMEOUT)
    loop = asyncio.get_running_loop()
    # LiteLLM imports the provider's image module on first use: in the executor.
    takes_format = await loop.run_in_executor(None, _takes_response_format, access.model)
    kwargs: dict[str, Any] = access.litellm_kwargs()
    if not request.references:
        # One image (LiteLLM's Gemini edit refuses `n`; every edit API makes one by default).
        kwargs["n"] = 1
    # The provider's HTTP client refuses invalid Unicode, as for a turn's text.
    kwargs["prompt"] = clean_text(request.prompt)
    if takes_format:
        kwargs["response_format"] = "b64_json"
    litellm = await async_litellm()
    if request.references:
        # LiteLLM's HTTP handler sends edits (no SDK client, no retries of its own).
        async with SHARED_CLIENT_USERS.use(), asyncio.timeout(timeout):
            response = await litellm.aimage_edit(
                image=[reference.data for reference in request.references],
                **kwargs,
                timeout=timeout,
            )
    else:
        if provider_of(access.model) in _OPENAI_SDK_PROVIDERS and access.request_key:
            from ..upstream.litellm_images import no_retry_client  # loaded with LiteLLM

            kwargs["client"] = no_retry_client(
                api_key=access.request_key,
                base_url=access.api_base,
                http_client=http_client,
                timeout=timeout,
            )
        async with SHARED_CLIENT_USERS.use(), asyncio.timeout(timeout):
            response = await litellm.aimage_generation(**kwargs, timeout=timeout)
    data, revised_prompt = await _image_of(response, access, http_client)
    facts = image_facts(data)
    usage = getattr(response, "usage", None)
    return GeneratedImage(
        data=data,
        mime_type=facts.mime_type,
        width=facts.width,
        height=facts.height,
        model=access.model,
        role=str(role),
        revised_prompt=revised_prompt,
        input_tokens=_count(usage, "input_tokens"),
        output_tokens=_count(usage, "output_tokens"),
    )


def _lacks_key(access: ModelAccess) -> bool:
    """litellm_chat.lacks_key (blocking: a thread), loaded there if it is not yet."""
    from .litellm_chat import lacks_key

    return lacks_key(access)


@functools.cache
def _takes_response_format(model: str) -> bool:
    """Whether LiteLLM sends `response_format` for this image model (DALL-E does;
    gpt-image-1 refuses it and always answers base64). Blocking on first use."""
    provider, _, name = model.partition("/")
    # LiteLLM first (set up by library.py), and what the call imports after this step.
    from .library import litellm  # isort: skip
    from litellm.utils import ProviderConfigManager

    from ..upstream import litellm_images, litellm_lazy  # noqa: F401  the SDK's client too
    from .litellm_chat import resolve_openai_chat_resources

    if provider in _OPENAI_SDK_PROVIDERS:
        # The SDK's resources, as any other provider's warm-up imports them (openai 3.10
        # imports every API's with the package): an Ollama chat model's leaves them out.
        resolve_openai_chat_resources()
    # LiteLLM's provider configs, which the chat warm-up leaves out (upstream/litellm_lazy.py).
    litellm_lazy.resolve_provider_configs()

    try:
        config = ProviderConfigManager.get_provider_image_generation_config(
            model=name, provider=litellm.LlmProviders(provider)
        )
    except ValueError:  # not a provider LiteLLM names
        return False
    if config is None:
        # LiteLLM passes everything on to OpenAI-compatible servers without a config.
        return provider in litellm.openai_compatible_providers
    return "response_format" in config.get_supported_openai_params(model=name)


async def _image_of(
    response: Any, access: ModelAccess, http_client: httpx.AsyncClient
) -> tuple[bytes, str | None]:
    """The first image's bytes and revised prompt; ImageProblem when there is none."""
    items = list(getattr(response, "data", None) or [])
    if not items:
        raise ImageProblem("the model returned no image")
    item = items[0]
    revised = _field(item, "revised_prompt")
    if encoded := _field(item, "b64_json"):
        # Base64 is 4 bytes per 3: refuse before decoding what would be too large.
        if len(encoded) > MAX_IMAGE_BYTES // 3 * 4 + 4:
            raise ImageProblem(f"the image is larger than {MAX_IMAGE_BYTES} bytes")
        try:
            return base64.b64decode(encoded, validate=True), revised
        except (binascii.Error, ValueError):
            raise ImageProblem("the model's base64 image data is damaged") from None
    if url := _field(item, "url"):
        if not may_download(url, access.api_base):
            raise ImageProblem("the model's image link points where it may not be fetched")
        return await download_image(http_client, url), revised
    raise ImageProblem("the model returned neither image data nor a link")


def _field(item: Any, name: str) -> Any:
    """A field of an image entry, whether LiteLLM gives a dict or an object."""
    value = item.get(name) if isinstance(item, dict) else getattr(item, name, None)
    return value if isinstance(value, str) and value else None


def _count(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)
    return value if isinstance(value, int) else 0
