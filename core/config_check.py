"""Check a config block against the constructor it builds, before any work starts.

Hydra's ``instantiate`` reports an unknown key only when the object is called, and for a
``_partial_`` block that may be after a whole ingest; a value of the wrong type is not reported
at all until it breaks something. The constructor's own signature is the schema: every key must
be one of its parameters (unless it takes ``**kwargs``) and every value must fit the parameter's
annotation (checked with pydantic in lax mode, so 5 fits ``float`` and "abc" does not fit ``int``).
Blocks nested in a block (a ``_target_`` of their own) are checked against their own target.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUndefinedAnnotation


class ConfigKeyError(ValueError):
    """A config key that the target does not take, or a value that does not fit its type."""


def check_config(block: Mapping[str, Any], where: str) -> None:
    """Check ``block`` (a plain dict with ``_target_``) and every nested ``_target_`` block in it."""
    from hydra.utils import get_object  # hydra resolves _target_ strings exactly as instantiate will

    try:
        target = get_object(str(block["_target_"]))
    except Exception as err:  # noqa: BLE001 - any import failure is a config error naming the key
        raise ConfigKeyError(f"{where}._target_={block.get('_target_')!r} cannot be imported: {err}") from err
    check_kwargs(target, block, where)


def check_kwargs(target: Callable[..., Any], kwargs: Mapping[str, Any], where: str) -> None:
    """Raise ConfigKeyError naming ``where.key`` for a key ``target`` does not take or a value of the wrong type."""
    signature = inspect.signature(target)
    params = signature.parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    hints = _annotations(target, params)
    for key, value in kwargs.items():
        if key.startswith("_") and key.endswith("_"):  # _target_, _partial_, _convert_, _recursive_
            continue
        if key not in params or params[key].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            if takes_any:
                continue
            known = sorted(k for k, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and k != "self")
            raise ConfigKeyError(f"{where}.{key}: unknown key for {_name(target)}; it takes {known}")
        if isinstance(value, Mapping) and "_target_" in value:
            check_config(value, f"{where}.{key}")
            continue
        hint = hints.get(key)
        if hint is None or hint is Any:
            continue
        try:
            TypeAdapter(hint).validate_python(value)
        except ValidationError as err:
            problem = err.errors()[0].get("msg", str(err))
            raise ConfigKeyError(f"{where}.{key}={value!r} does not fit {_name(target)}'s type {_show(hint)}: {problem}") from None
        except (PydanticSchemaGenerationError, PydanticUndefinedAnnotation, TypeError):
            continue  # a type pydantic cannot check (a Protocol, a class it cannot build): the key itself is known


def _annotations(target: Callable[..., Any], params: Mapping[str, inspect.Parameter]) -> dict[str, Any]:
    """Each parameter's annotation as a type; string annotations that do not resolve are left out."""
    func = target.__init__ if inspect.isclass(target) else target  # type: ignore[misc]
    namespace = getattr(inspect.unwrap(func), "__globals__", {})
    out: dict[str, Any] = {}
    for key, param in params.items():
        annotation = param.annotation
        if annotation is inspect.Parameter.empty:
            continue
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, dict(namespace), vars(typing))  # noqa: S307 - the module's own annotation text
            except Exception:  # noqa: BLE001 - names imported only for type checkers
                continue
        out[key] = annotation
    return out


def _name(target: Callable[..., Any]) -> str:
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def _show(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
