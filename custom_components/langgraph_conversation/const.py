"""Constants for LangGraph Conversation: keys and defaults, nothing else."""

from __future__ import annotations

from typing import Final

DOMAIN: Final = "langgraph_conversation"

# Config entry data: how to reach the model (step "Model access").
CONF_MODEL: Final = "model"
CONF_API_KEY: Final = "api_key"
CONF_API_BASE: Final = "api_base"

# Conversation agent (subentry) options.
CONF_PROMPT: Final = "prompt"
CONF_LLM_HASS_API: Final = "llm_hass_api"
CONF_TEMPERATURE: Final = "temperature"
CONF_MAX_TOKENS: Final = "max_tokens"
CONF_MAX_TOOL_ROUNDS: Final = "max_tool_rounds"
CONF_REQUEST_TIMEOUT: Final = "request_timeout"
CONF_TOOL_CATEGORIES: Final = "tool_categories"
CONF_COMPACT_CONTEXT: Final = "compact_context"
CONF_MEMORY: Final = "memory"
# After each answer, the housekeeping model saves lasting facts the person told.
CONF_LEARN_MEMORIES: Final = "learn_memories"
CONF_HISTORY_BUDGET: Final = "history_token_budget"
CONF_CONFIRM_ENTITIES: Final = "confirm_entities"
CONF_SAFETY_CHECK: Final = "safety_check"
CONF_CONTINUE_MINUTES: Final = "continue_recent_minutes"
# Whether "continue recent" also links a user's new text conversations (chat panel, API).
CONF_CONTINUE_TEXT: Final = "continue_text_conversations"
CONF_MODEL_RETRIES: Final = "model_retries"
CONF_AGENT_KIND: Final = "agent_kind"
CONF_BASE_PROMPT: Final = "base_prompt"
CONF_SEARCH_KNOWLEDGE: Final = "search_knowledge"
# Ollama's native API (`ollama_chat/` models) only, as Home Assistant's own Ollama agent:
# the context window, how long the model stays loaded, and whether it thinks first.
CONF_CONTEXT_WINDOW: Final = "num_ctx"
CONF_KEEP_ALIVE: Final = "keep_alive"
CONF_THINK: Final = "think"

# Agent kinds (agent/graph/graph.py AgentKind): the assistant acts with tools, the chatbot only
# talks, rag answers from the agent's documents.
DEFAULT_AGENT_KIND: Final = "assistant"
# An agent's documents: <config>/langgraph_conversation/knowledge/<agent name as a slug>/.
KNOWLEDGE_DIR: Final = "knowledge"

SUBENTRY_CONVERSATION: Final = "conversation"

DEFAULT_CONVERSATION_NAME: Final = "LangGraph Conversation"
DEFAULT_TEMPERATURE: Final = 0.7
DEFAULT_MAX_TOKENS: Final = 1024
DEFAULT_MAX_TOOL_ROUNDS: Final = 8
DEFAULT_REQUEST_TIMEOUT: Final = 60
# Extra attempts after a rate limit, server error or dropped connection (before any word).
DEFAULT_MODEL_RETRIES: Final = 1
# Tokens of conversation history kept verbatim before older turns are summarised; suits
# an 8k-context local model once the system prompt and tools are counted.
DEFAULT_HISTORY_BUDGET: Final = 4000
# A new conversation from the same satellite (and the same user, if any) within this many
# minutes continues the previous one (0 turns this off); see agent/memory/threads.py.
DEFAULT_CONTINUE_MINUTES: Final = 5
# Text clients (chat panel, API) start fresh unless the agent says otherwise.
DEFAULT_CONTINUE_TEXT: Final = False
# New agents get every category; "history" (issue 26) is offered only where the recorder runs.
DEFAULT_TOOL_CATEGORIES: Final = ["entities", "lights", "media", "weather", "history"]
# Ollama: the window sent with every request (bounded by the model's own context length);
# without one, Ollama uses 4,096 tokens on machines with less than 24 GiB of GPU memory.
DEFAULT_CONTEXT_WINDOW: Final = 8192
MIN_CONTEXT_WINDOW: Final = 2048
MAX_CONTEXT_WINDOW: Final = 131072
# Seconds Ollama keeps the model loaded after a request; -1 keeps it loaded (the next
# voice command does not wait for the model to load), 0 unloads it at once.
DEFAULT_KEEP_ALIVE: Final = -1
MAX_KEEP_ALIVE: Final = 86400
# Thinking of reasoning models: the model's own default, always, or never. Off unless the
# user turns it on, as Home Assistant's own Ollama agent: a reasoning model would otherwise
# think before every voice answer.
THINK_DEFAULT: Final = "default"
THINK_ON: Final = "on"
THINK_OFF: Final = "off"
DEFAULT_THINK: Final = THINK_OFF

# Seconds the config flow waits for its one validation request.
VALIDATION_TIMEOUT: Final = 30

# Storage under <config>/langgraph_conversation/: conversations and long-term memories.
THREADS_FILE: Final = "threads.db"
MEMORY_FILE: Final = "memory.db"
# Checkpoints kept per conversation: enough to resume (also a pending confirmation).
CHECKPOINTS_KEPT_PER_THREAD: Final = 3
# Conversations unused for this many days are deleted.
THREAD_IDLE_DAYS: Final = 30
MEMORY_RECALL_LIMIT: Final = 5
# Entry options ("Configure" on the model access entry). The files are shared by every
# entry, so differing values combine (persistence.py): the most checkpoints, the longest
# idle age (0 = never delete), and the embedding model of the first entry that sets one.
CONF_CHECKPOINTS_KEPT: Final = "checkpoints_kept"
CONF_THREAD_IDLE_DAYS: Final = "thread_idle_days"
CONF_EMBEDDING_MODEL: Final = "embedding_model"
CONF_EMBEDDING_API_KEY: Final = "embedding_api_key"
CONF_EMBEDDING_API_BASE: Final = "embedding_api_base"
MAX_CHECKPOINTS_KEPT: Final = 50
# PostgreSQL storage (LangGraph's official saver and store): installed by Home Assistant
# only for an entry that chooses it, so the default SQLite path installs nothing more.
# tests/test_packaging.py resolves them with the manifest under each leg's pins.
POSTGRES_REQUIREMENTS: Final = [
    "langgraph-checkpoint-postgres==3.2.0",
    "psycopg[binary,pool]==3.3.9",
]
MAX_THREAD_IDLE_DAYS: Final = 3650
# Where conversations and memories are kept (entry option): this machine's SQLite files,
# or a PostgreSQL database at a connection URL (a secret: it usually holds a password).
# Entries share one storage: the earliest added entry that chooses PostgreSQL decides.
CONF_STORAGE: Final = "storage"
STORAGE_SQLITE: Final = "sqlite"
STORAGE_POSTGRES: Final = "postgresql"
CONF_POSTGRES_URL: Final = "postgres_url"
# Seconds one embedding request may take before search goes on with full text only.
EMBEDDING_TIMEOUT: Final = 10
# Memories given a vector per backfill run (at start and every 6 hours), 32 per request.
EMBEDDING_BACKFILL_LIMIT: Final = 500

# AI Task (subentry type "ai_task_data"): one model call per task.
SUBENTRY_AI_TASK: Final = "ai_task_data"
DEFAULT_AI_TASK_NAME: Final = "AI Task"
# Data generation wants consistent, schema-following answers more than variety.
DEFAULT_AI_TASK_TEMPERATURE: Final = 0.3

# Longest request passed to the model, in characters; longer ones are cut and the user is
# told (a pasted document would otherwise fill a small model's whole context).
MAX_REQUEST_CHARS: Final = 8000

# Model roles and activity
# Agent options: the fast model (summaries) and the fallback model (answers when the main
# model fails), each a form section holding CONF_MODEL, CONF_API_KEY and CONF_API_BASE.
CONF_FAST_MODEL: Final = "fast_model"
CONF_FALLBACK_MODEL: Final = "fallback_model"
# Whether activity events and trace entries carry the words of requests, answers and
# tool calls (off: names, counts and timings only).
CONF_ACTIVITY_CONTENTS: Final = "activity_include_contents"
# Fired on the event bus for every turn start/end, tool start/end and failure.
EVENT_ACTIVITY: Final = "langgraph_conversation_activity"

# AI Task images (ai_task.generate_image): the AI Task subentry's image model and the
# image model that answers when it fails, each a form section holding CONF_MODEL,
# CONF_API_KEY and CONF_API_BASE (the key rule of the agents' roles). Without an image
# model the AI Task entity does not offer images.
CONF_IMAGE_MODEL: Final = "image_model"
CONF_IMAGE_FALLBACK_MODEL: Final = "image_fallback_model"
# Camera questions (tools/cameras.py): an agent option, off unless the owner turns it on,
# and the model that looks when the agent's own cannot see (a form section like the fast
# model's: CONF_MODEL, CONF_API_KEY, CONF_API_BASE).
CONF_CAMERAS: Final = "look_through_cameras"
CONF_VISION_MODEL: Final = "vision_model"

# Web search (#27 part 1, tools/web_search.py): an agent option, off unless the owner turns
# it on, and the model that searches when the agent's own cannot (a form section like the
# vision model's: CONF_MODEL, CONF_API_KEY, CONF_API_BASE).
CONF_WEB_SEARCH: Final = "web_search"
CONF_WEB_SEARCH_MODEL: Final = "web_search_model"
# Automations by voice (tools/automations.py): an agent option, off unless the owner turns
# it on, and a second, explicit one letting automations include critical actions (unlock,
# open a garage door, disarm...), then only after a yes that names them.
CONF_AUTOMATIONS: Final = "create_automations"
CONF_AUTOMATIONS_CRITICAL: Final = "automations_critical_actions"

# The migrate_storage action's directions (migrate.py): into the PostgreSQL database, or
# back into this machine's SQLite files.
MIGRATE_TO_POSTGRES: Final = "to_postgresql"
MIGRATE_TO_SQLITE: Final = "to_sqlite"
MIGRATION_DIRECTIONS: Final = (MIGRATE_TO_POSTGRES, MIGRATE_TO_SQLITE)
