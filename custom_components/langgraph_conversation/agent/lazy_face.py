"""Faces that import a module only when one of its names is first used.

A subpackage's face names what code outside it may use. Imported eagerly, a face would load
every module below it, and with them LiteLLM, LangGraph and the OpenAI SDK (seconds of
imports and about 150 MiB): a config entry's setup that only needs a model's provider or an
enum would pay for all of it on Home Assistant's start. A lazy face (PEP 562's module
`__getattr__`) imports the module that defines a name when the name is first looked up, so
`from .agent.models import provider_of` loads `access.py` alone, and the heavy stack loads in
the background after Home Assistant has started (stack.py on Home Assistant's side).

Written here rather than taken from a library: the one well-known package for this
(lazy_loader) is not among Home Assistant's requirements, and this is twenty lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
import importlib
import sys
from typing import Any


def lazy_face(
    package: str, homes: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` for the face of `package`.

    `homes` maps each module below the face (relative name) to the names it defines that
    the face offers. A name is resolved once, then kept in the face's namespace.
    """
    home_of = {name: module for module, names in homes.items() for name in names}
    # Where each name lives, for the check that a light module's late imports only look
    # names up (tests/test_light_setup.py).
    sys.modules[package].__lazy_homes__ = home_of  # type: ignore[attr-defined]

    def __getattr__(name: str) -> Any:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        # Kept in the face: the next lookup is a plain attribute, no call.
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *home_of})

    return __getattr__, __dir__, sorted(home_of)
