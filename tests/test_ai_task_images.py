"""ai_task.generate_image on our AI Task entity: OpenAI and Gemini image models reached
through LiteLLM's real client (fake servers speaking the real wire formats), the image
stored and served by Home Assistant's AI Task, retries, fallback, activity and the sentences.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
import json
from pathlib import Path
import random
from typing import Any

import pytest
from pytest_homeassistant_custom_component.common import (
    MockConfigEntry,
    MockUser,
    async_capture_events,
)
from pytest_homeassistant_custom_component.components.diagnostics import (
    get_diagnostics_for_config_entry,
)
from pytest_homeassistant_custom_component.typing import ClientSessionGenerator

from custom_components.langgraph_conversation.config_flow import (
    DEFAULT_AI_TASK_OPTIONS,
)
from custom_components.langgraph_conversation.const import (
    CONF_API_BASE,
    CONF_API_KEY,
    CONF_IMAGE_FALLBACK_MODEL,
    CONF_IMAGE_MODEL,
    CONF_MODEL,
    CONF_MODEL_RETRIES,
    DOMAIN,
    EVENT_ACTIVITY,
    SUBENTRY_AI_TASK,
)
from fakes import FakeGeminiServer, FakeOpenAIServer, png_image
from fakes.offline_model import IMAGE_MODEL as OFFLINE_IMAGE_MODEL, IMAGE_SIZE, OfflineModelServer
from homeassistant import config_entries
from homeassistant.components import ai_task
from homeassistant.core import Context, HomeAssistant
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import entity_registry as er

from .conftest import TEST_KEY, set_up_task_entry

STRINGS = Path(__file__).parents[1] / "custom_components" / DOMAIN / "strings.json"
GEMINI_KEY = "gm-test-key-0123456789"
IMAGEN = "imagen-4.0-generate-001"
GEMINI_IMAGE = "gemini-2.5-flash-image"
# Seeded: the generated cases are the same on every run and every leg.
RNG = random.Random(26)


def _message(key: str, **placeholders: str) -> str:
    text = json.loads(STRINGS.read_text())["exceptions"][key]["message"]
    # Home Assistant drops the final full stop of translated exception messages.
    return text.format(**placeholders).rstrip(".")


@pytest.fixture
async def gemini_server(socket_enabled: None) -> AsyncIterator[FakeGeminiServer]:
    """Gemini's image generation on 127.0.0.1, requiring GEMINI_KEY."""
    async with FakeGeminiServer() as server:
        server.api_key = GEMINI_KEY
        yield server


@pytest.fixture
def ai_task_overrides() -> dict[str, Any]:
    """Options a test changes on its AI Task (parametrize this fixture)."""
    return {CONF_IMAGE_MODEL: {CONF_MODEL: "openai/gpt-image-1"}}


async def _add_entry(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    ai_task_options: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> MockConfigEntry:
    """An entry for the OpenAI-compatible fake with one agent and one AI Task, set up."""
    # LiteLLM would read a key from these; a test must see only the keys configured.
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GEMINI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    return await set_up_task_entry(
        hass, openai_server.api_base, {**DEFAULT_AI_TASK_OPTIONS, **ai_task_options}
    )


@pytest.fixture
async def ai_entry(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    media_dir: Path,
    ai_task_overrides: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> MockConfigEntry:
    """An AI Task whose image model (by default openai/gpt-image-1) borrows the entry's
    key and base URL."""
    return await _add_entry(hass, openai_server, ai_task_overrides, monkeypatch)


def _task_entity_id(hass: HomeAssistant, entry: MockConfigEntry) -> str:
    subentry_id = next(
        s.subentry_id for s in entry.subentries.values() if s.subentry_type == SUBENTRY_AI_TASK
    )
    entity_id = er.async_get(hass).async_get_entity_id("ai_task", DOMAIN, subentry_id)
    assert entity_id is not None
    return entity_id


async def _generate(
    hass: HomeAssistant, entry: MockConfigEntry, instructions: str = "A red bicycle."
) -> dict[str, Any]:
    """The generate_image action, as an automation calls it, with its response."""
    response = await hass.services.async_call(
        "ai_task",
        "generate_image",
        {
            "task_name": "Picture",
            "entity_id": _task_entity_id(hass, entry),
            "instructions": instructions,
        },
        blocking=True,
        return_response=True,
    )
    assert response is not None
    return dict(response)


async def _stored_image(hass: HomeAssistant, media_dir: Path) -> bytes:
    """The one image Home Assistant's AI Task saved into its media folder."""

    def read() -> bytes:
        files = sorted((media_dir / "ai_task" / "image").iterdir())
        assert len(files) == 1, files
        return files[0].read_bytes()

    return await hass.async_add_executor_job(read)


# -- the feature -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ai_task_overrides", "images"),
    [
        ({}, False),
        ({CONF_IMAGE_MODEL: {CONF_MODEL: "openai/gpt-image-1"}}, True),
        # A fallback alone makes no images.
        ({CONF_IMAGE_FALLBACK_MODEL: {CONF_MODEL: "openai/dall-e-3"}}, False),
    ],
)
async def test_images_offered_only_with_an_image_model(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer, images: bool
) -> None:
    """GENERATE_IMAGE is advertised only by an AI Task with an image model; without one,
    Home Assistant refuses the action before anything reaches a model."""
    state = hass.states.get(_task_entity_id(hass, ai_entry))
    assert state is not None
    features = ai_task.AITaskEntityFeature(state.attributes["supported_features"])
    assert (ai_task.AITaskEntityFeature.GENERATE_IMAGE in features) is images
    assert ai_task.AITaskEntityFeature.GENERATE_DATA in features
    if not images:
        with pytest.raises(HomeAssistantError, match="does not support generating images"):
            await _generate(hass, ai_entry)
        assert openai_server.images.requests == []


# Generated cases: image sizes and prompts (words, punctuation, other scripts).
_WORDS = ["lamp", "garden", "Küche", "猫", "sunset", "robot", "rain", "door", "é", "42"]
SIZE_CASES = [
    (RNG.randint(1, 1600), RNG.randint(1, 1600), " ".join(RNG.choices(_WORDS, k=RNG.randint(1, 9))))
    for _ in range(4)
]


@pytest.mark.parametrize(("width", "height", "prompt"), SIZE_CASES)
async def test_openai_image_is_stored_and_served(
    hass: HomeAssistant,
    ai_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    media_dir: Path,
    hass_client_no_auth: ClientSessionGenerator,
    hass_admin_user: MockUser,
    width: int,
    height: int,
    prompt: str,
) -> None:
    """gpt-image-1 through OpenAI's wire format: Home Assistant stores the image in its
    media folder and serves it at the signed URL it returns, byte for byte the server's."""
    image = png_image(width, height, seed=width * height)
    openai_server.images.add_image(image)
    response = await hass.services.async_call(
        "ai_task",
        "generate_image",
        {
            "task_name": "Picture",
            "entity_id": _task_entity_id(hass, ai_entry),
            "instructions": prompt,
        },
        blocking=True,
        return_response=True,
        context=Context(user_id=hass_admin_user.id),
    )
    assert response is not None
    assert response["mime_type"] == "image/png"
    assert (response["width"], response["height"]) == (width, height)
    assert response["model"] == "openai/gpt-image-1"
    # No revised prompt from gpt-image-1: Home Assistant reports the instructions.
    assert response["revised_prompt"] == prompt
    assert response["conversation_id"]

    # What LiteLLM sent: OpenAI's request, the entry's key (same provider and server).
    assert openai_server.images.paths == ["/v1/images/generations"]
    assert openai_server.images.requests == [{"model": "gpt-image-1", "prompt": prompt, "n": 1}]
    assert openai_server.images.credentials == [f"Bearer {TEST_KEY}"]
    assert openai_server.request_count == 0  # no chat call

    assert await _stored_image(hass, media_dir) == image
    client = await hass_client_no_auth()
    served = await client.get(response["url"])
    assert served.status == 200
    assert await served.read() == image


@pytest.mark.parametrize("ai_task_overrides", [{CONF_IMAGE_MODEL: {CONF_MODEL: "openai/dall-e-3"}}])
async def test_dall_e_asked_for_base64_with_revised_prompt(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer, media_dir: Path
) -> None:
    """DALL-E answers links unless asked otherwise: it is asked for base64, and the
    prompt it rewrote comes back in the response."""
    image = png_image(64, 48, seed=3)
    openai_server.images.add_image(image, revised_prompt="A bright red bicycle on grass.")
    response = await _generate(hass, ai_entry)
    assert openai_server.images.requests == [
        {"model": "dall-e-3", "prompt": "A red bicycle.", "n": 1, "response_format": "b64_json"}
    ]
    assert response["revised_prompt"] == "A bright red bicycle on grass."
    assert (response["width"], response["height"]) == (64, 48)
    assert await _stored_image(hass, media_dir) == image
    # Nothing was downloaded: the image came in the answer.
    assert not any(path.startswith("GET /files/") for path in openai_server.paths)


async def test_linked_image_is_downloaded(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer, media_dir: Path
) -> None:
    """A server answering with a link to the image (on the server the model is configured
    at) has it fetched."""
    image = png_image(300, 200, seed=9)
    openai_server.images.add_image(image, as_link=True)
    response = await _generate(hass, ai_entry)
    assert (response["width"], response["height"]) == (300, 200)
    assert await _stored_image(hass, media_dir) == image
    assert "GET /files/images/image-1.png" in openai_server.paths


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        # A link into a private network, not the configured server: never fetched.
        ({"created": 1, "data": [{"url": "http://10.0.0.1/image.png"}]}, "may not be fetched"),
        ({"created": 1, "data": [{"url": "file:///etc/passwd"}]}, "may not be fetched"),
        ({"created": 1, "data": []}, "no image"),
        ({"created": 1, "data": [{"b64_json": "bm90IGFuIGltYWdl"}]}, "not an image"),
        ({"created": 1, "data": [{"b64_json": "%%%"}]}, "damaged"),
    ],
)
async def test_unusable_answers(
    hass: HomeAssistant,
    ai_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    media_dir: Path,
    body: dict[str, Any],
    detail: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An answer without a usable image fails with its own sentence, is not retried, and
    nothing is stored."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.images.add_raw(json.dumps(body).encode())
    with pytest.raises(HomeAssistantError) as caught:
        await _generate(hass, ai_entry)
    await hass.async_block_till_done()
    assert caught.value.translation_key == "turn_invalid_image"
    assert str(caught.value) == _message("turn_invalid_image")
    assert len(openai_server.images.requests) == 1
    assert detail in caplog.text
    assert [e.data["type"] for e in events] == ["turn_start", "error", "turn_end"]
    assert events[1].data["error"] == "invalid_image"
    assert not (media_dir / "ai_task").exists()


# -- errors, retries, fallback -----------------------------------------------------------

ERROR_CASES = [
    # status, turn error kind, attempts with one retry allowed
    (401, "auth", 1),
    (400, "bad_request", 1),
    (429, "rate_limit", 2),
    (500, "server", 2),
    (503, "server", 2),
]


@pytest.mark.parametrize(
    "ai_task_overrides",
    [{CONF_IMAGE_MODEL: {CONF_MODEL: "openai/gpt-image-1"}, CONF_MODEL_RETRIES: 1}],
)
@pytest.mark.parametrize(("status", "kind", "attempts"), ERROR_CASES)
async def test_errors_give_the_usual_sentences(
    hass: HomeAssistant,
    ai_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    status: int,
    kind: str,
    attempts: int,
) -> None:
    """Every failure is the sentence a conversation turn speaks for it; what may pass is
    tried again as often as the subentry says (and no more: the SDK adds no retries);
    the key never shows."""
    for _ in range(3):
        openai_server.images.add_error(
            status, f"scripted failure, key {TEST_KEY}", headers={"Retry-After": "0"}
        )
    events = async_capture_events(hass, EVENT_ACTIVITY)
    with pytest.raises(HomeAssistantError) as caught:
        await _generate(hass, ai_entry)
    await hass.async_block_till_done()
    assert caught.value.translation_key == f"turn_{kind}"
    assert str(caught.value) == _message(f"turn_{kind}")
    assert len(openai_server.images.requests) == attempts
    assert [e.data["type"] for e in events] == ["turn_start", "error", "turn_end"]
    assert events[1].data["error"] == kind
    assert TEST_KEY not in json.dumps([e.data for e in events])
    if status == 401:
        # A refused key asks for a new one, as for a turn.
        flows = hass.config_entries.flow.async_progress_by_handler(DOMAIN)
        assert [f["context"]["source"] for f in flows] == ["reauth"]


@pytest.mark.parametrize(
    "ai_task_overrides",
    [{CONF_IMAGE_MODEL: {CONF_MODEL: "openai/gpt-image-1"}, CONF_MODEL_RETRIES: 0}],
)
@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"<html>gateway hiccup</html>", "text/html"),
        (b'{"created": 1, "data": [', "application/json"),
    ],
)
async def test_bad_body_gives_a_sentence(
    hass: HomeAssistant,
    ai_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    body: bytes,
    content_type: str,
) -> None:
    """A 200 whose body is not the JSON answer (a proxy's page, a cut body) fails with the
    sentence of a broken connection: LiteLLM reports an unreadable answer with its
    connection error, as it does for a chat answer."""
    openai_server.images.add_raw(body, content_type=content_type)
    with pytest.raises(HomeAssistantError) as caught:
        await _generate(hass, ai_entry)
    assert caught.value.translation_key == "turn_connection"
    assert str(caught.value) == _message("turn_connection")
    assert len(openai_server.images.requests) == 1


@pytest.mark.parametrize(
    "ai_task_overrides",
    [{CONF_IMAGE_MODEL: {CONF_MODEL: "openai/gpt-image-1"}, CONF_MODEL_RETRIES: 2}],
)
async def test_rate_limit_is_retried(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer, media_dir: Path
) -> None:
    """Rate limits before the image are retried with the same request, and it succeeds."""
    image = png_image(16, 16, seed=1)
    openai_server.images.add_error(429, "Rate limit reached", headers={"Retry-After": "0"})
    openai_server.images.add_error(429, "Rate limit reached", headers={"Retry-After": "0"})
    openai_server.images.add_image(image)
    await _generate(hass, ai_entry)
    requests = openai_server.images.requests
    assert len(requests) == 3
    assert requests[0] == requests[1] == requests[2]
    assert await _stored_image(hass, media_dir) == image


@pytest.mark.parametrize(
    "ai_task_overrides",
    [
        {
            CONF_IMAGE_MODEL: {CONF_MODEL: "openai/gpt-image-1"},
            CONF_IMAGE_FALLBACK_MODEL: {CONF_MODEL: "openai/dall-e-3"},
            CONF_MODEL_RETRIES: 1,
        }
    ],
)
async def test_fallback_image_model_answers(
    hass: HomeAssistant,
    ai_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    media_dir: Path,
) -> None:
    """The image model fails twice (first attempt, retry): the image fallback makes the
    image, and the activity events name it."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    image = png_image(40, 30, seed=5)
    openai_server.images.add_error(503, "overloaded", headers={"Retry-After": "0"})
    openai_server.images.add_error(503, "overloaded", headers={"Retry-After": "0"})
    openai_server.images.add_image(image)
    response = await _generate(hass, ai_entry)
    await hass.async_block_till_done()
    assert [r["model"] for r in openai_server.images.requests] == [
        "gpt-image-1",
        "gpt-image-1",
        "dall-e-3",
    ]
    assert response["model"] == "openai/dall-e-3"
    assert await _stored_image(hass, media_dir) == image
    start, end = (e.data for e in events)
    assert (start["type"], end["type"]) == ("turn_start", "turn_end")
    assert start["agent_id"] == end["agent_id"] == _task_entity_id(hass, ai_entry)
    assert start["model"] == "openai/gpt-image-1"
    assert (end["model"], end["model_role"]) == ("openai/dall-e-3", "fallback")
    assert (end["model_calls"], end["error"]) == (1, None)
    assert start["conversation_id"] == end["conversation_id"] == response["conversation_id"]


@pytest.mark.parametrize(
    "ai_task_overrides",
    [
        {
            CONF_IMAGE_MODEL: {CONF_MODEL: "openai/gpt-image-1"},
            CONF_IMAGE_FALLBACK_MODEL: {CONF_MODEL: "openai/dall-e-3"},
        }
    ],
)
async def test_no_fallback_for_a_refused_request(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """A request the provider refuses (400: a prompt against its policy) is not handed to
    the fallback: it would refuse it too."""
    openai_server.images.add_error(400, "Your request was rejected by the safety system.")
    with pytest.raises(HomeAssistantError) as caught:
        await _generate(hass, ai_entry)
    assert caught.value.translation_key == "turn_bad_request"
    assert [r["model"] for r in openai_server.images.requests] == ["gpt-image-1"]


async def test_usage_counts_in_activity(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """gpt-image-1's token usage reaches the task's activity end, as a turn's does."""
    events = async_capture_events(hass, EVENT_ACTIVITY)
    openai_server.images.add_image(png_image(8, 8))
    await _generate(hass, ai_entry, "Twelve characters long prompt")
    await hass.async_block_till_done()
    end = events[-1].data
    assert end["type"] == "turn_end"
    assert (end["model"], end["model_role"]) == ("openai/gpt-image-1", "main")
    # The fake counts a token per four characters of the prompt, and 1056 for the image.
    assert (end["input_tokens"], end["output_tokens"]) == (7, 1056)


def _attachment(name: str, mime_type: str = "image/png") -> dict[str, str]:
    return {
        "media_content_id": f"media-source://media_source/local/{name}",
        "media_content_type": mime_type,
    }


EDIT_CASES = [
    [png_image(RNG.randint(1, 300), RNG.randint(1, 300), seed=n) for n in range(count)]
    for count in (1, 2, 3)
]


@pytest.mark.parametrize("references", EDIT_CASES)
async def test_attachments_are_edited(
    hass: HomeAssistant,
    ai_entry: MockConfigEntry,
    openai_server: FakeOpenAIServer,
    media_dir: Path,
    references: list[bytes],
) -> None:
    """Attached images go to OpenAI's image edits as the form's `image[]` files, in order,
    and the edited image comes back like a new one."""
    names = [f"photo-{n}.png" for n in range(len(references))]
    for name, data in zip(names, references, strict=True):
        await hass.async_add_executor_job((media_dir / name).write_bytes, data)
    edited = png_image(50, 40, seed=99)
    openai_server.images.add_image(edited)
    response = await ai_task.async_generate_image(
        hass,
        task_name="Picture",
        entity_id=_task_entity_id(hass, ai_entry),
        instructions="Paint them in watercolour.",
        attachments=[_attachment(name) for name in names],
    )
    assert openai_server.images.paths == ["/v1/images/edits"]
    (request,) = openai_server.images.requests
    assert {k: v for k, v in request.items() if k != "image[]"} == {
        "model": "gpt-image-1",
        "prompt": "Paint them in watercolour.",
    }
    assert [f["data"] for f in request["image[]"]] == references
    assert {f["content_type"] for f in request["image[]"]} == {"image/png"}
    assert openai_server.images.credentials == [f"Bearer {TEST_KEY}"]
    assert (response["width"], response["height"]) == (50, 40)
    stored = await hass.async_add_executor_job(
        lambda: [p.read_bytes() for p in (media_dir / "ai_task" / "image").iterdir()]
    )
    assert stored == [edited]


async def test_non_image_attachment_refused(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer, media_dir: Path
) -> None:
    """Another file than an image is refused with a sentence naming it, before any call."""
    await hass.async_add_executor_job((media_dir / "notes.txt").write_text, "hello")
    with pytest.raises(HomeAssistantError) as caught:
        await ai_task.async_generate_image(
            hass,
            task_name="Picture",
            entity_id=_task_entity_id(hass, ai_entry),
            instructions="Illustrate this.",
            attachments=[_attachment("notes.txt", "text/plain")],
        )
    assert caught.value.translation_key == "ai_task_attachment_type"
    assert str(caught.value) == _message(
        "ai_task_attachment_type", name="notes.txt", mime_type="text/plain"
    )
    assert openai_server.images.requests == []


# -- Gemini ------------------------------------------------------------------------------


def _gemini_overrides(model: str, **extra: Any) -> dict[str, Any]:
    return {
        CONF_IMAGE_MODEL: {CONF_MODEL: f"gemini/{model}", **extra},
        CONF_MODEL_RETRIES: 1,
    }


@pytest.fixture
def gemini_overrides() -> dict[str, Any]:
    """The image section of a Gemini test (parametrize), its base URL added by the test."""
    return {}


@pytest.fixture
async def gemini_entry(
    hass: HomeAssistant,
    openai_server: FakeOpenAIServer,
    gemini_server: FakeGeminiServer,
    media_dir: Path,
    gemini_overrides: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> MockConfigEntry:
    """An OpenAI-compatible entry whose AI Task makes images with a Gemini model."""
    options = json.loads(
        json.dumps(gemini_overrides).replace("GEMINI_BASE", gemini_server.api_base)
    )
    return await _add_entry(hass, openai_server, options, monkeypatch)


@pytest.mark.parametrize(
    ("gemini_overrides", "path", "expected_body"),
    [
        (
            _gemini_overrides(IMAGEN, api_key=GEMINI_KEY, api_base="GEMINI_BASE"),
            f"/v1beta/models/{IMAGEN}:predict",
            {"instances": [{"prompt": "A red bicycle."}], "parameters": {"sampleCount": 1}},
        ),
        (
            _gemini_overrides(GEMINI_IMAGE, api_key=GEMINI_KEY, api_base="GEMINI_BASE"),
            f"/v1beta/models/{GEMINI_IMAGE}:generateContent",
            {
                "contents": [{"parts": [{"text": "A red bicycle."}]}],
                "generationConfig": {"response_modalities": ["IMAGE", "TEXT"]},
            },
        ),
    ],
)
async def test_gemini_image(
    hass: HomeAssistant,
    gemini_entry: MockConfigEntry,
    gemini_server: FakeGeminiServer,
    openai_server: FakeOpenAIServer,
    media_dir: Path,
    path: str,
    expected_body: dict[str, Any],
) -> None:
    """Imagen (:predict) and Gemini's image models (:generateContent) in Google's wire
    format, with the image section's own key; a rate limit is retried."""
    image = png_image(96, 54, seed=7)
    gemini_server.images.add_error(429, "Resource has been exhausted (e.g. check quota).")
    gemini_server.images.add_image(image, text="Here is your bicycle.")
    response = await _generate(hass, gemini_entry)
    assert gemini_server.images.paths == [path, path]
    assert gemini_server.images.requests == [expected_body, expected_body]
    assert gemini_server.images.credentials == [GEMINI_KEY, GEMINI_KEY]
    assert response["mime_type"] == "image/png"
    assert (response["width"], response["height"]) == (96, 54)
    assert response["model"] == f"gemini/{path.rsplit('/', 1)[1].split(':')[0]}"
    assert await _stored_image(hass, media_dir) == image
    # The entry's key went nowhere near Google, and nothing reached the OpenAI fake.
    assert TEST_KEY not in json.dumps(gemini_server.images.credentials)
    assert openai_server.images.requests == []


@pytest.mark.parametrize("gemini_overrides", [_gemini_overrides(IMAGEN, api_base="GEMINI_BASE")])
async def test_entry_key_never_reaches_another_provider(
    hass: HomeAssistant, gemini_entry: MockConfigEntry, gemini_server: FakeGeminiServer
) -> None:
    """An image model of another provider without a key of its own gets no key from the
    entry: LiteLLM refuses before sending (not retried), and the sentence says so."""
    with pytest.raises(HomeAssistantError) as caught:
        await _generate(hass, gemini_entry)
    assert caught.value.translation_key == "turn_missing_key"
    assert str(caught.value) == _message("turn_missing_key")
    assert gemini_server.images.requests == []


@pytest.mark.parametrize(
    "gemini_overrides",
    [
        {
            **_gemini_overrides(IMAGEN, api_key=GEMINI_KEY, api_base="GEMINI_BASE"),
            CONF_IMAGE_FALLBACK_MODEL: {
                CONF_MODEL: f"gemini/{GEMINI_IMAGE}",
                CONF_API_BASE: "GEMINI_BASE",
            },
            CONF_MODEL_RETRIES: 0,
        }
    ],
)
async def test_gemini_fallback_borrows_the_image_models_key(
    hass: HomeAssistant,
    gemini_entry: MockConfigEntry,
    gemini_server: FakeGeminiServer,
    media_dir: Path,
) -> None:
    """The image fallback without a key of its own uses the image model's key, where both
    go to the same server; it answers when Imagen has a server error."""
    image = png_image(20, 10, seed=11)
    gemini_server.images.add_error(500, "Internal error encountered.")
    gemini_server.images.add_image(image)
    response = await _generate(hass, gemini_entry)
    assert gemini_server.images.paths == [
        f"/v1beta/models/{IMAGEN}:predict",
        f"/v1beta/models/{GEMINI_IMAGE}:generateContent",
    ]
    assert gemini_server.images.credentials == [GEMINI_KEY, GEMINI_KEY]
    assert response["model"] == f"gemini/{GEMINI_IMAGE}"
    assert await _stored_image(hass, media_dir) == image


@pytest.mark.parametrize(
    "gemini_overrides",
    [_gemini_overrides(GEMINI_IMAGE, api_key=GEMINI_KEY, api_base="GEMINI_BASE")],
)
async def test_gemini_edits_attached_images(
    hass: HomeAssistant,
    gemini_entry: MockConfigEntry,
    gemini_server: FakeGeminiServer,
    media_dir: Path,
) -> None:
    """Gemini's image model gets the attached image inline before the instructions."""
    photo = png_image(33, 21, seed=8)
    await hass.async_add_executor_job((media_dir / "garden.png").write_bytes, photo)
    edited = png_image(33, 21, seed=80)
    gemini_server.images.add_image(edited)
    response = await ai_task.async_generate_image(
        hass,
        task_name="Picture",
        entity_id=_task_entity_id(hass, gemini_entry),
        instructions="Add a red bicycle.",
        attachments=[_attachment("garden.png")],
    )
    assert gemini_server.images.paths == [f"/v1beta/models/{GEMINI_IMAGE}:generateContent"]
    assert gemini_server.images.requests == [
        {
            "contents": [
                {
                    "parts": [
                        {
                            "inlineData": {
                                "mimeType": "image/png",
                                "data": base64.b64encode(photo).decode(),
                            }
                        },
                        {"text": "Add a red bicycle."},
                    ]
                }
            ]
        }
    ]
    assert gemini_server.images.credentials == [GEMINI_KEY]
    assert (response["width"], response["height"]) == (33, 21)
    assert await _stored_image(hass, media_dir) == edited


# -- the form ----------------------------------------------------------------------------


@pytest.mark.parametrize("ai_task_overrides", [{}])
async def test_subentry_image_sections(
    hass: HomeAssistant, ai_entry: MockConfigEntry, openai_server: FakeOpenAIServer
) -> None:
    """The AI Task form stores the image sections trimmed (an empty one is dropped); an
    image model added later makes the entity offer images once the entry reloaded."""
    result = await hass.config_entries.subentries.async_init(
        (ai_entry.entry_id, SUBENTRY_AI_TASK), context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.FORM
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"],
        {
            "name": "Pictures",
            CONF_IMAGE_MODEL: {
                CONF_MODEL: " openai/gpt-image-1 ",
                CONF_API_KEY: " sk-image ",
                CONF_API_BASE: "",
            },
            CONF_IMAGE_FALLBACK_MODEL: {CONF_MODEL: " "},
        },
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.CREATE_ENTRY
    created = next(s for s in ai_entry.subentries.values() if s.title == "Pictures")
    assert created.data[CONF_IMAGE_MODEL] == {
        CONF_MODEL: "openai/gpt-image-1",
        CONF_API_KEY: "sk-image",
    }
    assert CONF_IMAGE_FALLBACK_MODEL not in created.data
    entity_id = er.async_get(hass).async_get_entity_id("ai_task", DOMAIN, created.subentry_id)
    assert entity_id is not None
    state = hass.states.get(entity_id)
    assert state is not None
    assert state.attributes["supported_features"] & ai_task.AITaskEntityFeature.GENERATE_IMAGE

    # The first AI Task (no image model) gets one through its reconfigure form.
    first = _task_entity_id(hass, ai_entry)
    first_state = hass.states.get(first)
    assert first_state is not None
    assert (
        not first_state.attributes["supported_features"]
        & ai_task.AITaskEntityFeature.GENERATE_IMAGE
    )
    subentry_id = next(
        s.subentry_id
        for s in ai_entry.subentries.values()
        if s.subentry_type == SUBENTRY_AI_TASK and s.title == "Test AI Task"
    )
    result = await hass.config_entries.subentries.async_init(
        (ai_entry.entry_id, SUBENTRY_AI_TASK),
        context={"source": config_entries.SOURCE_RECONFIGURE, "subentry_id": subentry_id},
    )
    result = await hass.config_entries.subentries.async_configure(
        result["flow_id"], {CONF_IMAGE_MODEL: {CONF_MODEL: "openai/dall-e-3"}}
    )
    await hass.async_block_till_done()
    assert result["reason"] == "reconfigure_successful"
    first_state = hass.states.get(first)
    assert first_state is not None
    assert first_state.attributes["supported_features"] & ai_task.AITaskEntityFeature.GENERATE_IMAGE
    image = png_image(12, 12, seed=2)
    openai_server.images.add_image(image)
    response = await _generate(hass, ai_entry)
    assert response["model"] == "openai/dall-e-3"


# -- the offline stand-in ----------------------------------------------------------------


async def test_offline_stand_in_draws_a_picture(
    hass: HomeAssistant,
    media_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    socket_enabled: None,
) -> None:
    """scripts/develop --offline-model's stand-in answers generate_image with a picture of
    its own (a band of colour per word), as its AI Task there is configured."""
    async with OfflineModelServer() as server:
        entry = await _add_entry(
            hass,
            server,
            {CONF_IMAGE_MODEL: {CONF_MODEL: f"openai/{OFFLINE_IMAGE_MODEL}"}},
            monkeypatch,
        )
        first = await _generate(hass, entry, "a red bicycle")
        first_image = await _stored_image(hass, media_dir)
        assert (first["width"], first["height"]) == (IMAGE_SIZE, IMAGE_SIZE)
        assert first["revised_prompt"] == "Coloured bands, one per word of: a red bicycle"
        # Home Assistant names the file by the second and the task: the same name again.
        await hass.async_add_executor_job(
            lambda: [p.unlink() for p in (media_dir / "ai_task" / "image").iterdir()]
        )
        second = await _generate(hass, entry, "a blue boat at night")
        assert (second["width"], second["height"]) == (IMAGE_SIZE, IMAGE_SIZE)
        assert await _stored_image(hass, media_dir) != first_image  # other words
        assert [r["model"] for r in server.images.requests] == [OFFLINE_IMAGE_MODEL] * 2
        assert await hass.config_entries.async_unload(entry.entry_id)


@pytest.mark.parametrize(
    "ai_task_overrides",
    [
        {
            CONF_IMAGE_MODEL: {CONF_MODEL: "openai/gpt-image-1", CONF_API_KEY: "sk-image-secret"},
            CONF_IMAGE_FALLBACK_MODEL: {
                CONF_MODEL: "gemini/imagen-4.0-generate-001",
                CONF_API_KEY: "gm-fallback-secret",
            },
        }
    ],
)
async def test_image_keys_stay_out_of_diagnostics(
    hass: HomeAssistant, ai_entry: MockConfigEntry, hass_client: ClientSessionGenerator
) -> None:
    """The image sections' keys are redacted like every other key."""
    diagnostics = await get_diagnostics_for_config_entry(hass, hass_client, ai_entry)
    text = json.dumps(diagnostics)
    assert "gpt-image-1" in text  # the section is there...
    assert "sk-image-secret" not in text  # ...without its key
    assert "gm-fallback-secret" not in text
