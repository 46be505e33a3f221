"""Model access (Ollama's native API; every other provider through LiteLLM): settings and
credentials, chat models and their streams, error classification, warm-up and shared
clients, roles (fast, fallback), the model catalog, Ollama's options, embeddings, one
streamed model call with its fallback, one-shot calls (AI Task) that need no graph,
images (AI Task's generate_image), a look at one image (camera questions), and a web
search with its sources.

The names here are what code outside this folder may use.
"""

from __future__ import annotations

from ..lazy_face import lazy_face

__getattr__, __dir__, __all__ = lazy_face(
    __name__,
    {
        "access": ("ModelAccess", "ModelSettings", "provider_of"),
        "answer": (
            "AnswerBuilder",
            "AnswerLimitExceeded",
            "answer_deadline",
            "cached_input_tokens",
        ),
        "catalog": ("async_list_models",),
        "chat": ("needs_litellm",),
        "embeddings": (
            "EmbeddingError",
            "LiteLLMEmbedder",
            "async_embed",
            "embedding_access",
            "warm_up_embeddings",
        ),
        "error_kinds": ("classify_error", "to_model_error"),
        "images": (
            "INVALID_IMAGE",
            "GeneratedImage",
            "ImageModels",
            "ImageRequest",
            "ReferenceImage",
            "generate_image",
            "image_models",
        ),
        "library": ("load_model_library",),
        "lifecycle": (
            "async_check_access",
            "async_release_shared_clients",
            "resolve_langchain_exports",
            "warm_up",
            "warm_up_once",
        ),
        "model_call": ("stream_with_fallback",),
        "ollama": ("bounded_settings", "forget_model_windows", "window_of"),
        "one_shot": ("InvalidAnswer", "TaskRequest", "model_capabilities", "run_task"),
        "role_accesses": ("RoleAccesses", "role_access"),
        "roles": (
            "ModelCache",
            "ModelRole",
            "RoleModel",
            "RoleModels",
        ),
        "vision": ("Looker", "look_at_image", "looking_model"),
        "web_search": (
            "Searcher",
            "Source",
            "WebAnswer",
            "search_web",
            "searches",
            "searching_model",
        ),
    },
)
