"""Install fidelity: the integration works where only Home Assistant and our manifest are.

The test virtualenvs hold many packages a user's Home Assistant does not (the test plugin,
its tools, other integrations' libraries), so an import the manifest forgot can pass every
other test. Two checks close that gap:

- every third-party import in the integration's source belongs to a distribution the
  manifest declares or Home Assistant core itself depends on;
- a bare virtualenv with Home Assistant (installed under its own package_constraints.txt)
  and the manifest's requirements (installed by Home Assistant's own installer function,
  under the same constraints) imports every module of the integration and has one real
  conversation turn with the scripted stand-in model (tests/packaging_probe.py). Home
  Assistant installs what the integrations it loads need, as it does for a user.

The bare virtualenv is cached per Home Assistant version, Python and manifest (building it
takes a minute with a warm package cache; a run with it cached takes seconds).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
from pathlib import Path
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

from custom_components.langgraph_conversation.const import POSTGRES_REQUIREMENTS
import homeassistant
from homeassistant.const import __version__ as HA_VERSION

ROOT = Path(__file__).resolve().parent.parent
INTEGRATION = ROOT / "custom_components" / "langgraph_conversation"
MANIFEST_PATH = INTEGRATION / "manifest.json"
MANIFEST = json.loads(MANIFEST_PATH.read_text())
HA_CONSTRAINTS = Path(homeassistant.__file__).parent / "package_constraints.txt"
# Bump when the way the bare virtualenv is built changes (it is part of the cache key).
RECIPE = "1"


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    name = re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _with_extras(requirement: str) -> set[str]:
    """The distributions a requirement brings: its own, and one per extra (psycopg[pool]
    installs psycopg-pool)."""
    name = _name(requirement)
    extras = re.search(r"\[([^\]]*)\]", requirement)
    return {name} | {
        f"{name}-{_name(extra)}" for extra in (extras.group(1).split(",") if extras else [])
    }


# Modules whose packages Home Assistant installs only when the user chooses what needs
# them (PostgreSQL), never with the manifest: their imports are declared there instead.
ON_DEMAND = {
    f"custom_components/langgraph_conversation/storage/{module}.py": set().union(
        *(_with_extras(r) for r in POSTGRES_REQUIREMENTS)
    )
    for module in ("postgres/__init__", "postgres/backend", "postgres/house")
}


def _imported(nodes: list[ast.stmt]) -> set[str]:
    """Top-level third-party modules imported (absolutely) anywhere in these statements."""
    names: set[str] = set()
    for node in (inner for statement in nodes for inner in ast.walk(statement)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {
        top
        for top in (name.split(".", 1)[0] for name in names)
        if top not in sys.stdlib_module_names and top not in ("homeassistant", "__future__")
    }


def _third_party_imports() -> list[tuple[set[str], str, bool]]:
    """(alternatives, file, optional): each import, or the modules of a try/except
    ImportError block (one per Home Assistant version), where any one of the alternatives
    must be there; optional when the except branch imports nothing instead."""
    found: list[tuple[set[str], str, bool]] = []
    for path in INTEGRATION.rglob("*.py"):
        where = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        grouped: set[int] = set()
        for node in ast.walk(tree):
            catches_import_error = isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                for h in node.handlers
            )
            if catches_import_error:
                branches = [node.body, *(h.body for h in node.handlers)]
                if alternatives := set().union(*(_imported(b) for b in branches)):
                    optional = not any(_imported(h.body) for h in node.handlers)
                    found.append((alternatives, where, optional))
                grouped.update(id(n) for b in branches for s in b for n in ast.walk(s))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in grouped:
                found.extend(({module}, where, False) for module in _imported([node]))
    return found


def _core_closure() -> set[str]:
    """Home Assistant core's distributions: what it requires, and what those require."""
    seen: set[str] = set()
    todo = ["homeassistant"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo.extend(_name(r) for r in requires if "extra ==" not in r)
    return seen


def test_every_import_is_declared_or_provided_by_home_assistant() -> None:
    """numpy was imported by storage/sqlite/store.py and present only by chance: not again.

    Home Assistant's own dependencies (voluptuous, httpx, ...) come with every install; a
    package our requirements merely pull in (openai, through litellm) must be declared.
    """
    declared = {_name(r) for r in MANIFEST["requirements"]}
    core = _core_closure()
    providers = importlib.metadata.packages_distributions()
    undeclared = set()
    for alternatives, where, optional in _third_party_imports():
        installed = [m for m in alternatives if importlib.util.find_spec(m) is not None]
        satisfied = optional and not installed
        for module in alternatives:
            if importlib.util.find_spec(module) is None:
                continue  # the alternative for another Home Assistant version
            # The module the name gives once Home Assistant is imported: 2026.11 makes
            # `httpx` its own httpx2 (an alias in sys.modules).
            loaded = sys.modules.get(module)
            real = loaded.__name__.split(".", 1)[0] if loaded is not None else module
            # A single-file module may be missing from the map; its distribution is its name.
            if {_name(d) for d in providers.get(real, [real])} & (
                declared | core | ON_DEMAND.get(where, set())
            ):
                satisfied = True
        if not satisfied:
            undeclared.add(f"{'/'.join(sorted(alternatives))} ({where})")
    assert not undeclared, f"imported, in neither the manifest nor Home Assistant's: {undeclared}"


# -- the bare installation ----------------------------------------------------------------


def _cache_root() -> Path:
    """The leg's cache (scripts/test sets LGC_CACHE), else the user's cache directory."""
    base = os.environ.get("LGC_CACHE") or Path.home() / ".cache" / "langgraph_conversation"
    return Path(base) / "installs"


def _run(command: list[str], **kwargs) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stderr[-3000:]}"


def _build(venv: Path) -> None:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"
    python = venv / "bin" / "python"
    _run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)])
    # Home Assistant as its container image has it: under its own constraints.
    constrained = ["--constraint", str(HA_CONSTRAINTS)]
    _run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(python),
            *constrained,
            f"homeassistant=={HA_VERSION}",
        ]
    )
    # The manifest's requirements through Home Assistant's own installer, with the
    # arguments its requirements manager passes (upgrade, its constraints file).
    install = (
        "import sys; from homeassistant.util.package import install_package; "
        "sys.exit(0 if install_package(sys.argv[1], upgrade=True, constraints=sys.argv[2]) "
        "else 1)"
    )
    for requirement in MANIFEST["requirements"]:
        _run([str(python), "-c", install, requirement, str(HA_CONSTRAINTS)])
    (venv / ".lgc-complete").touch()


@pytest.fixture(scope="module")
def bare_python() -> Iterator[Path]:
    """The bare virtualenv's interpreter, built once per key and then reused.

    Held under a lock while used: Home Assistant installs into it during the probe, and a
    second run (another checkout) waits rather than install the same packages at once.
    """
    key = hashlib.sha256(
        MANIFEST_PATH.read_bytes() + f"{HA_VERSION} {sys.version} {RECIPE}".encode()
    ).hexdigest()[:16]
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    prefix = f"ha-{HA_VERSION}-py{sys.version_info[0]}{sys.version_info[1]}-"
    venv = root / f"{prefix}{key}"
    with (root / f".{prefix}{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / ".lgc-complete").exists():
            # Others unused for three days are stale (newer ones may be another checkout's).
            for old in root.glob(f"{prefix}*"):
                used = old / ".lgc-used" if (old / ".lgc-used").exists() else old
                if time.time() - used.stat().st_mtime > 3 * 86400:
                    shutil.rmtree(old, ignore_errors=True)
            _build(venv)
        (venv / ".lgc-used").touch()
        yield venv / "bin" / "python"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def stand_in_model(tmp_path: Path) -> Iterator[str]:
    """The scripted stand-in model (fakes/offline_model.py) on 127.0.0.1."""
    ready = tmp_path / "model.port"
    process = subprocess.Popen(
        [sys.executable, "-m", "fakes.offline_model", "--ready-file", str(ready)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not (ready.exists() and ready.read_text().strip()):
            assert process.poll() is None, "the stand-in model did not start"
            assert time.monotonic() < deadline, "the stand-in model did not start in 60s"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{ready.read_text().strip()}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _module_name(path: Path) -> str:
    """The module a source file is, by its path in the repository (a package's __init__.py
    is the package)."""
    parts = path.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _source_modules() -> set[str]:
    return {_module_name(path.relative_to(ROOT)) for path in INTEGRATION.rglob("*.py")}


@pytest.mark.registry
def test_a_bare_install_imports_everything_and_answers(
    socket_enabled: None, bare_python: Path, stand_in_model: str, tmp_path: Path
) -> None:
    # Bare indeed: none of the test tools, none of the plugin's extras.
    for absent in ("pytest", "pytest_homeassistant_custom_component"):
        check = subprocess.run(
            [str(bare_python), "-c", f"import {absent}"], capture_output=True, check=False
        )
        assert check.returncode != 0, f"{absent} is in the bare install"
    done = subprocess.run(
        [
            str(bare_python),
            str(ROOT / "tests" / "packaging_probe.py"),
            str(tmp_path / "config"),
            stand_in_model,
            str(_free_port()),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # Every module, but the one whose packages are installed only on demand (PostgreSQL):
    # it must not be importable there, or the bare install would carry them.
    on_demand = {_module_name(Path(path)) for path in ON_DEMAND}
    assert set(result["modules"]) == _source_modules() - on_demand
    assert "scripted stand-in" in result["speech"], result["speech"]
