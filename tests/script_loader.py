"""Import a tool under scripts/ (a package) by name, for tests that call its functions.

Equivalent to ``from scripts import <name>``; kept so that tests written against the former
file-path loader keep working.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def load_script(name: str) -> ModuleType:
    """The module ``scripts.<name>``."""
    return importlib.import_module(f"scripts.{name}")
