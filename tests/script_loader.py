"""Import a command module (``scripts.<name>`` or ``research.<name>``, both packages) by name, for tests
that call its functions.

Equivalent to ``from scripts import <name>``; kept so that tests written against the former
file-path loader keep working.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def load_script(name: str, package: str = "scripts") -> ModuleType:
    """The module ``<package>.<name>``: a user command under scripts/ or a research tool under research/."""
    return importlib.import_module(f"{package}.{name}")
