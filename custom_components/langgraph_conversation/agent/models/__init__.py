"""Model access through LiteLLM: settings and credentials, chat models and their
streams, error classification, warm-up and shared clients, roles (fast, fallback), the
model catalog, Ollama's options, embeddings, one streamed model call with its fallback,
one-shot calls (AI Task) that need no graph, images (AI Task's generate_image), a look
at one image (camera questions), and a web search with its sources.

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from .access import ModelAccess, ModelSettings, provider_of
from .answer import AnswerBuilder, AnswerLimitExceeded, answer_deadline, cached_input_tokens
from .catalog import async_list_models
from .embeddings import (
    EmbeddingError,
    LiteLLMEmbedder,
    async_embed,
    embedding_access,
    warm_up_embeddings,
)
from .error_kinds import classify_error, to_model_error
from .images import (
    INVALID_IMAGE,
    GeneratedImage,
    ImageModels,
    ImageRequest,
    ReferenceImage,
    generate_image,
    image_models,
)
from .lifecycle import (
    async_check_access,
    async_release_shared_clients,
    resolve_langchain_exports,
    warm_up,
    warm_up_once,
)
from .model_call import stream_with_fallback
from .ollama import bounded_settings, forget_model_windows, window_of
from .one_shot import InvalidAnswer, TaskRequest, model_capabilities, run_task
from .roles import ModelCache, ModelRole, RoleAccesses, RoleModel, RoleModels, role_access
from .vision import Looker, look_at_image, looking_model
from .web_search import Searcher, Source, WebAnswer, search_web, searches, searching_model

__all__ = [
    "INVALID_IMAGE",
    "AnswerBuilder",
    "AnswerLimitExceeded",
    "EmbeddingError",
    "GeneratedImage",
    "ImageModels",
    "ImageRequest",
    "InvalidAnswer",
    "LiteLLMEmbedder",
    "Looker",
    "ModelAccess",
    "ModelCache",
    "ModelRole",
    "ModelSettings",
    "ReferenceImage",
    "RoleAccesses",
    "RoleModel",
    "RoleModels",
    "Searcher",
    "Source",
    "TaskRequest",
    "WebAnswer",
    "answer_deadline",
    "async_check_access",
    "async_embed",
    "async_list_models",
    "async_release_shared_clients",
    "bounded_settings",
    "cached_input_tokens",
    "classify_error",
    "embedding_access",
    "forget_model_windows",
    "generate_image",
    "image_models",
    "look_at_image",
    "looking_model",
    "model_capabilities",
    "provider_of",
    "resolve_langchain_exports",
    "role_access",
    "run_task",
    "search_web",
    "searches",
    "searching_model",
    "stream_with_fallback",
    "to_model_error",
    "warm_up",
    "warm_up_embeddings",
    "warm_up_once",
    "window_of",
]
