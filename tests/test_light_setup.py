"""Setting up an entry imports none of the agent's libraries (stack.py, agent/lazy_face.py).

Home Assistant imports an integration, its platforms and its config flow while it starts;
LiteLLM, LangGraph, langchain-core and the OpenAI SDK take seconds and ~150 MiB to import,
so they load with the entry's stack in the background, after the start. Checked in fresh
interpreters: the test process itself has long imported everything.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
import subprocess
import sys

from custom_components.langgraph_conversation.stack import STACK_MODULES

PACKAGE = "custom_components.langgraph_conversation"
ROOT = Path(__file__).resolve().parents[1]
CODE = ROOT / "custom_components" / "langgraph_conversation"
# What Home Assistant imports of ours before any turn: the integration, its platforms, the
# config flow (listed at start for discovery and the UI), diagnostics (a platform of the
# diagnostics integration), and what those import.
ENTRY_MODULES = ("", ".conversation", ".ai_task", ".config_flow", ".diagnostics")
HEAVY = ("litellm", "langgraph", "langchain_core", "langchain_litellm", "openai", "tiktoken")


def _run(code: str) -> dict:
    """Run `code` in a fresh interpreter of this leg; it prints one JSON line."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_entry_modules_import_none_of_the_agents_libraries() -> None:
    found = _run(
        "import json, sys\n"
        # What Home Assistant has loaded when it imports a conversation agent's integration.
        "import homeassistant.components.conversation, homeassistant.components.ai_task\n"
        f"for name in {[PACKAGE + m for m in ENTRY_MODULES]!r}:\n"
        "    __import__(name)\n"
        f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))\n"
    )
    assert found == []


def test_the_check_sees_a_library_imported() -> None:
    """The same check, importing a stack module, finds the libraries."""
    found = _run(
        "import json, sys\n"
        f"import {PACKAGE}.turn_assembly\n"
        f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))\n"
    )
    assert {"langgraph", "langchain_core"} <= set(found)


def test_an_ollama_stack_loads_neither_litellm_nor_the_openai_sdk() -> None:
    """An entry whose models Ollama serves loads the stack without LiteLLM (issue #29); the
    same load with LiteLLM's chat (another provider) is the control."""
    code = (
        "import json, sys\n"
        f"from {PACKAGE}.stack import _import_modules\n"
        "_import_modules(litellm={litellm})\n"
        f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))\n"
    )
    assert _run(code.format(litellm=False)) == ["langchain_core", "langgraph"]
    assert {"litellm", "openai", "langchain_litellm"} <= set(_run(code.format(litellm=True)))


def _late_imports(path: Path) -> list[tuple[str, list[str]]]:
    """The `from … import …` statements inside functions of one module of ours, as
    (absolute module, names)."""
    module = f"{PACKAGE}.{path.relative_to(CODE).with_suffix('').as_posix().replace('/', '.')}"
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    package = package.removesuffix(".__init__")
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom) and inner.level:
                base = package.rsplit(".", inner.level - 1)[0] if inner.level > 1 else package
                target = f"{base}.{inner.module}" if inner.module else base
                found.append((target, [alias.name for alias in inner.names]))
    return found


def _light_modules() -> list[Path]:
    """Our Home Assistant side modules outside the stack (the stack's own may import late
    for their own reasons)."""
    stack = {f"{name.replace('.', '/')}.py" for name in STACK_MODULES}
    return [
        path
        for path in sorted(CODE.glob("*.py"))
        if path.name not in stack and path.name != "stack.py"
    ]


def test_late_imports_of_light_modules_only_look_up_what_the_stack_loaded() -> None:
    """A light module imports the stack's names inside functions that run once the stack
    is loaded: each such import must name a module the stack's load imported (or, through
    a lazy face, a name whose module it imported), else it would import on the event loop."""
    imports = [late for path in _light_modules() for late in _late_imports(path)]
    assert imports, "no late imports found: the check reads nothing"
    missing = _run(
        "import importlib, json, sys\n"
        f"from {PACKAGE}.stack import _import_modules\n"
        # An Ollama entry's load, without LiteLLM: what every late import may count on.
        "_import_modules(litellm=False)\n"
        f"imports = {imports!r}\n"
        "missing = []\n"
        "for module, names in imports:\n"
        "    if module not in sys.modules:\n"
        "        missing.append(module); continue\n"
        "    homes = getattr(sys.modules[module], '__lazy_homes__', {})\n"
        "    for name in names:\n"
        "        home = homes.get(name)\n"
        "        if home is not None and f'{module}.{home}' not in sys.modules:\n"
        "            missing.append(f'{module}.{home} ({name})')\n"
        "print(json.dumps(missing))\n"
    )
    assert missing == []


FACES = (
    "agent.models",
    "agent.runtime",
    "agent.graph",
    "agent.guard",
    "agent.memory",
    "agent.knowledge",
    "tools",
)


def test_every_name_of_a_lazy_face_resolves() -> None:
    """Each name a lazy face offers exists in the module it names (and is no module)."""
    problems = _run(
        "import importlib, json, types\n"
        "problems = []\n"
        f"for face_name in {[f'{PACKAGE}.{face}' for face in FACES]!r}:\n"
        "    face = importlib.import_module(face_name)\n"
        "    if not face.__all__:\n"
        "        problems.append(f'{face_name}: empty')\n"
        "    for name in face.__all__:\n"
        "        value = getattr(face, name, None)\n"
        "        if value is None or isinstance(value, types.ModuleType):\n"
        "            problems.append(f'{face_name}.{name}')\n"
        "print(json.dumps(problems))\n"
    )
    assert problems == []
