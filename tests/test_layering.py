"""The house's rooms, enforced: who may import whom (docs/ARCHITECTURE.md, "Layout").

- `agent/` never imports Home Assistant, `tools/`, `storage/` or the integration's
  Home Assistant-side modules: it receives tools and an event sink.
- `storage/` knows SQLite and LangGraph's storage interfaces: neither Home Assistant nor
  `agent/` nor `tools/`.
- LiteLLM and langchain-litellm are imported under `agent/` only: conversation turns and
  AI Tasks share one model path.
- The integration never imports the development packages (`fakes`, `tests`, `scripts`):
  only custom_components/ is shipped. The fakes, the model's side of the wire, import
  neither the integration nor the tests.
- scripts/ never imports `tests`: the tools (bench, develop, e2e, brand) run without the
  test suite; what they share with it lives in `fakes`. Each tool is an entry script
  `scripts/<tool>` with its Python in the package `scripts/<tool>_lib/` beside it, and
  scripts/lib/ holds the shell helpers the entry scripts share.
- The tests' folders mirror the code's (tests/agent/ for agent/, ...), besides the named
  cross-cutting suites.
- agent/'s subpackages are reached through their faces (their __init__.py) from outside
  them, and agent's rooms import one another without a circle.
- The integration's rooms (its top-level modules and subpackages) import one another
  without a circle, imports for type checking only included.

Read from the source (every import statement, also inside functions), so a lazy import
cannot slip past.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "custom_components" / "langgraph_conversation"

# Room → top-level packages and sibling rooms it must never import.
FORBIDDEN = {
    "agent": ("homeassistant", "tools", "storage", "<integration>"),
    "storage": ("homeassistant", "agent", "tools", "<integration>"),
}


def _imports(source: str, package: str) -> list[tuple[int, str]]:
    """(line, what) for every import in a module of `package` (its dotted place inside the
    integration, "agent" or "agent.graph"): absolute module names' top package, or the room
    a relative one reaches ("tools", "agent", "storage", or "<integration>" for the
    package's own top-level modules)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.append((node.lineno, (node.module or "").split(".")[0]))
            else:
                target = _relative_target(node, package).split(".")[0]
                rooms = {*FORBIDDEN, "tools"}
                found.append((node.lineno, target if target in rooms else "<integration>"))
    return found


def _relative_target(node: ast.ImportFrom, package: str) -> str:
    """The dotted module a relative import names, inside the integration ("" for the
    integration's own package)."""
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_rooms_import_only_what_they_may(room: str) -> None:
    """No module of the room imports what the layout forbids it."""
    files = sorted((PACKAGE / room).rglob("*.py"))
    assert files, room
    broken = [
        f"{path.relative_to(PACKAGE)}:{line} imports {target}"
        for path in files
        for line, target in _imports(path.read_text(encoding="utf-8"), _package_of(path))
        if target in FORBIDDEN[room]
    ]
    assert broken == []


def _package_of(path: Path) -> str:
    """A module's package, dotted, inside the integration ("agent.graph")."""
    return ".".join(path.relative_to(PACKAGE).parent.parts)


def test_the_check_sees_forbidden_imports() -> None:
    """The walker itself: lazy imports inside functions, relative reaches into other rooms
    and into the integration's own modules are all found (the contract cannot pass by
    seeing nothing)."""
    source = (
        "def f():\n"
        "    import homeassistant.core\n"
        "    from ..tools import registry\n"
        "    from .. import const\n"
        "    from ..storage.sqlite import SqliteDatabase\n"
        "    from .graph import build_graphs\n"
    )
    assert [target for _, target in _imports(source, "agent")] == [
        "homeassistant",
        "tools",
        "<integration>",
        "storage",
        "agent",
    ]


def test_the_check_knows_where_a_subpackage_module_stands() -> None:
    """In a subpackage (storage/sqlite/store.py), `..` is still the room and `...` the
    integration: reaching into another room or a top-level module from there is seen."""
    source = (
        "from .database import SqliteDatabase\n"
        "from ..ranking import hybrid_scores\n"
        "from ...agent.model import ModelAccess\n"
        "from ... import const\n"
    )
    assert [target for _, target in _imports(source, "storage.sqlite")] == [
        "storage",
        "storage",
        "agent",
        "<integration>",
    ]


# Packages Home Assistant installs only for an entry that chooses PostgreSQL
# (const.POSTGRES_REQUIREMENTS): imported by the PostgreSQL backend, storage/postgres/,
# alone.
_ON_DEMAND = (
    "psycopg",
    "psycopg_pool",
    "langgraph.checkpoint.postgres",
    "langgraph.store.postgres",
)


def _absolute_imports(source: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


_POSTGRES_MODULES = {
    "storage/postgres/__init__.py",
    "storage/postgres/backend.py",
    "storage/postgres/house.py",
}


def test_postgres_packages_are_imported_by_the_postgres_modules_only() -> None:
    """The SQLite path never needs the on-demand PostgreSQL packages to import."""
    broken = [
        f"{path.relative_to(PACKAGE)}:{line} imports {module}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() not in _POSTGRES_MODULES
        for line, module in _absolute_imports(path.read_text(encoding="utf-8"))
        if any(module == name or module.startswith(f"{name}.") for name in _ON_DEMAND)
    ]
    assert broken == []


def _storage_reaches(source: str) -> list[tuple[int, str]]:
    """(line, module) for every relative import of a top-level integration module that
    names something in storage/ ("storage" for the face, "storage.sqlite.store" below it)."""
    return [
        (node.lineno, node.module)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
        and node.level == 1
        and node.module is not None
        and node.module.split(".")[0] == "storage"
    ]


def test_the_integration_imports_storage_through_its_face() -> None:
    """Outside storage/, only storage/__init__.py is imported: which module of which
    backend holds a class is the room's own business (the PostgreSQL backend, loaded on
    demand by postgres_packages.py, is imported by name there, not by an import line)."""
    broken = [
        f"{path.relative_to(PACKAGE)}:{line} imports {module}"
        for path in sorted(PACKAGE.glob("*.py"))
        for line, module in _storage_reaches(path.read_text(encoding="utf-8"))
        if module != "storage"
    ]
    assert broken == []
    found = _storage_reaches("from .storage import SqliteStorage\nfrom .storage.copy import x\n")
    assert [module for _, module in found] == ["storage", "storage.copy"]


# The model libraries: every call, workaround and error mapping lives under agent/, so
# the Home Assistant side has one model path (conversation turns and AI Task alike).
_MODEL_LIBRARIES = ("litellm", "langchain_litellm")


def test_model_libraries_are_imported_under_agent_only() -> None:
    """No module outside agent/ imports LiteLLM or langchain-litellm."""
    broken = [
        f"{path.relative_to(PACKAGE)}:{line} imports {module}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "agent"
        for line, module in _absolute_imports(path.read_text(encoding="utf-8"))
        if module.split(".")[0] in _MODEL_LIBRARIES
    ]
    assert broken == []


def test_the_model_library_check_sees_lazy_imports() -> None:
    """The walker finds a model library imported inside a function, in either form."""
    source = "def f():\n    import litellm.types\n    from langchain_litellm import ChatLiteLLM\n"
    found = [module.split(".")[0] for _, module in _absolute_imports(source)]
    assert found == ["litellm", "langchain_litellm"]


# Acting on the home and reading it: only tools/ may read entity states or call services
# (Home Assistant's own LLM API tools reach the home too: tools/ha_llm_api.py binds them).
_STATE_ROOMS = ("tools",)


def _state_touches(source: str) -> list[tuple[int, str]]:
    """(line, what) for every `<...>hass.states.<x>` and `<...>hass.services.async_call`
    or `.call` in the source."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)):
            continue
        owner = node.value.value
        owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if owner_name != "hass":
            continue
        if node.value.attr == "states" or (
            node.value.attr == "services" and node.attr in ("async_call", "call")
        ):
            found.append((node.lineno, f"hass.{node.value.attr}.{node.attr}"))
    return found


def test_only_tools_read_states_or_call_services() -> None:
    """Everything else reaches the home through a tool (and so through the effect gate
    and the exposure rules)."""
    broken = [
        f"{path.relative_to(PACKAGE)}:{line} uses {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in _STATE_ROOMS
        for line, what in _state_touches(path.read_text(encoding="utf-8"))
    ]
    assert broken == []


def test_the_state_check_sees_reads_and_calls() -> None:
    """The walker finds state reads and service calls through `hass` or `self.hass`, and
    not a service registration."""
    source = (
        "def f(hass, self):\n"
        "    hass.states.get('lock.front')\n"
        "    self.hass.services.async_call('lock', 'unlock', {})\n"
        "    hass.services.async_register('d', 's', f)\n"
    )
    assert [what for _, what in _state_touches(source)] == [
        "hass.states.get",
        "hass.services.async_call",
    ]


# Development packages at the repository root: never shipped with the integration.
_DEVELOPMENT = ("fakes", "tests", "scripts")


def test_the_integration_never_imports_development_packages() -> None:
    """HACS and an install copy custom_components/langgraph_conversation alone: an import of
    the fakes or the tests would work in the repository and fail in every home."""
    broken = [
        f"{path.relative_to(PACKAGE)}:{line} imports {module}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, module in _absolute_imports(path.read_text(encoding="utf-8"))
        if module.split(".")[0] in _DEVELOPMENT
    ]
    assert broken == []


def test_the_fakes_import_neither_the_integration_nor_the_tests() -> None:
    """The fake model servers stand where a model server stands: what they answer cannot
    depend on the code under test, and scripts use them without the tests."""
    files = sorted((ROOT / "fakes").rglob("*.py"))
    assert files
    broken = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in files
        for line, module in _absolute_imports(path.read_text(encoding="utf-8"))
        if module.split(".")[0] in ("custom_components", "tests", "homeassistant")
    ]
    assert broken == []


SCRIPTS = ROOT / "scripts"
_IMPORTERS = ("import_module", "__import__")


def _imports_by_name(source: str) -> list[tuple[int, str]]:
    """_absolute_imports, plus the modules named by a string to importlib.import_module or
    __import__ (an import the import statements do not show)."""
    found = _absolute_imports(source)
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0]
        if name in _IMPORTERS and isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append((node.lineno, first.value))
    return found


def test_scripts_never_import_the_tests() -> None:
    """The bench, develop, e2e and brand tools run without the test suite: what they share
    with it (the fake servers, the throwaway PostgreSQL) lives in `fakes`."""
    files = sorted(SCRIPTS.rglob("*.py"))
    assert files
    broken = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in files
        for line, module in _imports_by_name(path.read_text(encoding="utf-8"))
        if module.split(".")[0] == "tests"
    ]
    assert broken == []


def test_the_scripts_check_sees_every_way_to_import_the_tests() -> None:
    """The walker finds the tests imported at the top, inside a function, and by name
    through importlib or __import__; a package merely named alike is not the tests."""
    source = (
        "import tests.helpers\n"
        "import testsuite\n"
        "def f():\n"
        "    from tests import postgres\n"
        "    from tests.postgres import start_server\n"
        "    importlib.import_module('tests.postgres')\n"
        "    import_module('tests')\n"
        "    __import__('tests.conftest')\n"
        "    importlib.import_module(name)\n"
    )
    found = [module for _, module in _imports_by_name(source)]
    assert [module for module in found if module.split(".")[0] == "tests"] == [
        "tests.helpers",
        "tests",
        "tests.postgres",
        "tests.postgres",
        "tests",
        "tests.conftest",
    ]
    assert "testsuite" in found


def test_scripts_follow_one_layout() -> None:
    """Each tool's Python is a package scripts/<tool>_lib/ beside its entry script
    scripts/<tool>; no Python lies loose in scripts/ or among the shared shell helpers in
    scripts/lib/."""
    packages = sorted(path for path in SCRIPTS.glob("*_lib") if path.is_dir())
    assert packages
    without_entry = [
        path.name
        for path in packages
        if not (SCRIPTS / path.name.removesuffix("_lib")).is_file()
        or not (path / "__init__.py").is_file()
    ]
    shell_helpers = [path for path in (SCRIPTS / "lib").iterdir() if path.is_file()]
    loose = sorted(
        path.relative_to(ROOT).as_posix()
        for path in [*SCRIPTS.glob("*.py"), *shell_helpers]
        if path.suffix != ".sh"
    )
    assert (without_entry, loose) == ([], [])


# Test folders that test across the code's folders instead of mirroring one.
_CROSS_CUTTING = {"reliability"}


def test_test_folders_mirror_the_code() -> None:
    """Every test folder is a package (module names cannot collide) named after a folder of
    the integration (tests/agent/upstream/ for agent/upstream/), or a named cross-cutting
    suite."""
    tests = ROOT / "tests"
    folders = sorted(
        path.relative_to(tests)
        for path in tests.rglob("*")
        if path.is_dir() and "__pycache__" not in path.parts and any(path.glob("test_*.py"))
    )
    assert folders
    strays = [
        folder.as_posix()
        for folder in folders
        if folder.parts[0] not in _CROSS_CUTTING and not (PACKAGE / folder).is_dir()
    ]
    missing_init = [f.as_posix() for f in folders if not (tests / f / "__init__.py").is_file()]
    assert (strays, missing_init) == ([], [])


# -- agent/'s faces and floors -------------------------------------------------------------
# agent/ is rooms of its own: top-level modules (errors.py, events.py, hooks.py) and
# subpackages whose __init__.py is their face (what others may use). Code outside a
# subpackage imports its face, never a module below it: the face can change behind it.
AGENT = PACKAGE / "agent"
_DOTTED = "custom_components.langgraph_conversation"
# Library workarounds, one a module, each with its contract test: imported by name, no face.
_FACELESS = {"upstream"}


def _module_of(path: Path) -> str:
    """A file's dotted module name ("custom_components.langgraph_conversation.agent")."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, dotted module) for every import, relative ones resolved; `from x import y`
    names x.y as well when y may be a module (the caller checks which exist)."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return found


def _agent_room(dotted: str) -> tuple[str, bool] | None:
    """The agent room a dotted module lies in, and whether it names a module below a
    subpackage's face; None outside agent/ or for a name that is no module."""
    prefix = f"{_DOTTED}.agent."
    if not dotted.startswith(prefix):
        return None
    parts = dotted.removeprefix(prefix).split(".")
    path = AGENT.joinpath(*parts)
    if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
        return None
    return parts[0], len(parts) > 1


def _below_a_face(files: list[Path]) -> list[str]:
    """Imports, in `files`, of a module below one of agent's subpackage faces (a module
    of agent/ importing within its own subpackage is fine)."""
    broken = []
    for path in files:
        module = _module_of(path)
        own = _agent_room(module) if path.is_relative_to(AGENT) else None
        source = path.read_text(encoding="utf-8")
        for line, dotted in _imported_modules(source, module, path.name == "__init__.py"):
            room = _agent_room(dotted)
            if room is None or not room[1] or room[0] in _FACELESS:
                continue
            if own is None or own[0] != room[0]:
                broken.append(f"{path.relative_to(ROOT)}:{line} imports {dotted}")
    return broken


def test_only_faces_are_imported_from_agent_subpackages() -> None:
    """Outside agent/ (the integration, its scripts) and across agent's own rooms, a
    subpackage is reached through its face (`agent.models`, never `agent.models.chat`);
    the tests may reach inside to test a part alone. upstream/ has no face: each of its
    workarounds is a module of its own, imported by name."""
    files = sorted(
        path
        for folder in (PACKAGE, ROOT / "scripts")
        for path in folder.rglob("*.py")
        if "__pycache__" not in path.parts
    )
    assert files
    assert _below_a_face(files) == []


def test_the_face_check_sees_imports_below_a_face() -> None:
    """The walker itself: a lazy, relative import of a module below a face is found, in
    either form, and a face import is not."""
    module = PACKAGE / "services.py"
    source = (
        "from .agent.models import ModelAccess\n"
        "from .agent.errors import TurnError\n"
        "def f():\n"
        "    from .agent.models.access import ModelAccess\n"
        "    from .agent.models import chat\n"
        "    import custom_components.langgraph_conversation.agent.graph.state\n"
    )
    found = [
        dotted
        for _, dotted in _imported_modules(source, _module_of(module), is_package=False)
        if (room := _agent_room(dotted)) is not None and room[1]
    ]
    assert found == [
        f"{_DOTTED}.agent.models.access",
        f"{_DOTTED}.agent.models.chat",
        f"{_DOTTED}.agent.graph.state",
    ]


def _agent_rooms_graph() -> dict[str, set[str]]:
    """agent's rooms (top-level modules and subpackages) and the rooms each imports."""
    arrows: dict[str, set[str]] = {}
    for path in sorted(AGENT.rglob("*.py")):
        module = _module_of(path)
        own = _agent_room(module) if path != AGENT / "__init__.py" else ("__init__", False)
        assert own is not None
        source = path.read_text(encoding="utf-8")
        for _, dotted in _imported_modules(source, module, path.name == "__init__.py"):
            room = _agent_room(dotted)
            arrows.setdefault(own[0], set())
            if room is not None and room[0] != own[0]:
                arrows[own[0]].add(room[0])
    return arrows


def _circle(arrows: dict[str, set[str]]) -> list[str]:
    """One import circle among the rooms, or [] when there is none."""
    state: dict[str, str] = {}
    trail: list[str] = []

    def visit(room: str) -> list[str]:
        state[room] = "open"
        trail.append(room)
        for target in sorted(arrows.get(room, ())):
            if state.get(target) == "open":
                return [*trail[trail.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        state[room] = "done"
        trail.pop()
        return []

    for room in sorted(arrows):
        if room not in state and (found := visit(room)):
            return found
    return []


def test_agent_rooms_import_in_one_direction() -> None:
    """No import circle among agent's rooms: each stands on the ones below it."""
    arrows = _agent_rooms_graph()
    assert {"errors", "guard", "models", "graph", "runtime"} <= set(arrows)
    assert _circle(arrows) == []


def test_the_circle_check_sees_a_circle() -> None:
    """The search finds a circle through three rooms, and none in a ladder."""
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def _integration_room(dotted: str) -> str | None:
    """The integration's room a dotted module lies in: a top-level module or subpackage
    ("stack", "agent"); None outside, or for the package itself (every import of a module
    runs its __init__; test_nothing_imports_the_integrations_own_init checks the names)."""
    prefix = f"{_DOTTED}."
    if not dotted.startswith(prefix):
        return None
    first = dotted.removeprefix(prefix).split(".")[0]
    place = PACKAGE / first
    if place.with_suffix(".py").is_file() or (place / "__init__.py").is_file():
        return first
    return None


def _integration_rooms_graph() -> dict[str, set[str]]:
    """The integration's rooms and the rooms each imports: every import, those inside
    functions and those for type checking only too."""
    arrows: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "__init__.py":
            continue  # sets the entries up: it imports the house, nothing imports it
        module = _module_of(path)
        own = _integration_room(module)
        assert own is not None, path
        source = path.read_text(encoding="utf-8")
        targets = arrows.setdefault(own, set())
        for _, dotted in _imported_modules(source, module, path.name == "__init__.py"):
            room = _integration_room(dotted)
            if room is not None and room != own:
                targets.add(room)
    return arrows


def test_the_integrations_rooms_import_in_one_direction() -> None:
    """No import circle among the integration's modules and subpackages, not even one
    for annotations only: each stands on the ones below it (a type that two rooms need
    lives below both, as LangGraphConfigEntry in runtime_entry.py)."""
    arrows = _integration_rooms_graph()
    assert {"stack", "runtime_entry", "persistence", "agent", "tools", "storage"} <= set(arrows)
    assert _circle(arrows) == []


def test_the_rooms_graph_sees_type_only_and_lazy_imports() -> None:
    """The graph holds the arrows a circle check needs: runtime_entry names EntryStack for
    type checking only, stack imports persistence inside a function."""
    arrows = _integration_rooms_graph()
    assert "stack" in arrows["runtime_entry"]
    assert "persistence" in arrows["stack"]


def _names_from_the_package_face(source: str, package: str) -> list[tuple[int, str]]:
    """(line, name) for every name a module imports from the integration's own
    __init__.py (`from . import X` at the top, `from .. import X` one level down), where X
    is not a module or subpackage of the integration."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.ImportFrom) and node.level and node.module is None):
            continue
        if _relative_target(node, package) != "":
            continue
        for alias in node.names:
            place = PACKAGE / alias.name
            if not (place.with_suffix(".py").is_file() or (place / "__init__.py").is_file()):
                found.append((node.lineno, alias.name))
    return found


def test_nothing_imports_the_integrations_own_init() -> None:
    """The integration's __init__.py sets up entries and imports most modules; a module
    that imported a name from it (even for annotations only) would be an arrow running
    back up the house. Shared names live in modules of their own (runtime_entry.py)."""
    broken = [
        f"{path.relative_to(PACKAGE)}:{line} imports {name} from the integration's __init__"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "__init__.py"
        for line, name in _names_from_the_package_face(
            path.read_text(encoding="utf-8"), _package_of(path)
        )
    ]
    assert broken == []


def test_the_init_check_sees_an_import_from_the_face() -> None:
    """The walker finds a name taken from the package's __init__, at the top and one level
    down, also inside a function, and lets modules and subpackages through."""
    top = "from . import LangGraphConfigEntry, const\ndef f():\n    from . import DOMAIN\n"
    assert _names_from_the_package_face(top, "") == [(1, "LangGraphConfigEntry"), (3, "DOMAIN")]
    below = "from .. import LangGraphConfigEntry\nfrom . import TOOLS\nfrom .. import agent\n"
    assert _names_from_the_package_face(below, "tools") == [(1, "LangGraphConfigEntry")]


# Longest function the integration may have: a longer one is two things in one.
_LONGEST_FUNCTION = 80


def _long_functions(source: str) -> list[tuple[str, int]]:
    """(name, lines) of every function or method longer than _LONGEST_FUNCTION, its
    decorators and docstring included."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > _LONGEST_FUNCTION:
                found.append((node.name, length))
    return found


def test_no_function_is_over_80_lines() -> None:
    """Small functions that say what they do: none in the integration is over 80 lines."""
    long = [
        f"{path.relative_to(PACKAGE)}: {name} has {length} lines"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, length in _long_functions(path.read_text(encoding="utf-8"))
    ]
    assert long == []


def test_the_length_check_counts_what_it_should() -> None:
    """An 81-line function is found, with its decorator; an 80-line one, and a short
    function nested in a long module, are not."""
    body = "".join(f"    x{n} = {n}\n" for n in range(78))
    source = f"@decorated\ndef long():\n{body}    return 1\n\ndef fits():\n{body}    return 1\n"
    assert _long_functions(source) == [("long", 81)]
