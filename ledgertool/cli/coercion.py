"""Option values coerced without pydantic where the result is sure.

typer >= 0.2x coerces every option value through a pydantic TypeAdapter, and importing pydantic
costs ~0.2 s of CPU, about what the rest of a `capture` of a small file costs. The values nearly
every command is given (paths, strings, flags, numbers, choices, lists of them) are coerced here to
what the adapter returns; anything else, and every value the adapter would refuse (so that the
error the user sees is the adapter's own), goes to the adapter.
tests/unit/test_cli_plain_coercion.py holds both to the same results for every parameter of every
command.
"""

from __future__ import annotations

import math
import re
import typing
from pathlib import Path

# The digits both int() and pydantic read alike (no spaces, underscores or non-ASCII digits, no
# numbers too long for int() to take); anything else is left to the adapter.
_INT = re.compile(r"[+-]?[0-9]{1,18}")
_FLOAT = re.compile(r"[+-]?(?:[0-9]{1,18}(?:\.[0-9]{0,18})?|\.[0-9]{1,18})(?:[eE][+-]?[0-9]{1,2})?")


class LazyCoercion:
    """typer >= 0.2x builds a pydantic TypeAdapter for a parameter the first time it processes a
    value, even None (an option not given, a group's --help not asked for). None needs no
    adapter, nor does a value `plain_value` coerces, so it is built only for any other value."""

    def __init__(self, param) -> None:
        self.param, self.real = param, None

    def coerce(self, value, param, ctx):
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        if self.real is None:
            plain = plain_value(param.type_descriptor, value, param, ctx)
            if plain is not None:
                return plain
        if self.real is None:
            from typer._coercion import build_runtime_param

            self.real = build_runtime_param(param.type_descriptor)
        return self.real.coerce(value, param=param, ctx=ctx)


def plain_value(descriptor, value, param, ctx):
    """`value` coerced as typer's pydantic adapter would (None where this cannot tell): a flag's
    bool and a string option's str are already what it returns; a path is made a Path and checked
    by typer's own path checks, and a choice matched by typer's own matching, as the adapter
    does; a number in plain digits is read by int() or float() and kept within the option's
    bounds (clamped where the option clamps; None where it would be refused)."""
    info, annotation = descriptor.parameter_info, descriptor.annotation
    if info.parser is not None or descriptor.file_annotation is not None:
        return None
    if typing.get_origin(annotation) is list:  # nargs=-1 or multiple: a tuple of values
        (leaf,) = typing.get_args(annotation) or (None,)
        if not isinstance(value, tuple) or leaf is None:
            return None
        items = [_plain_leaf(leaf, info, item, param, ctx) for item in value]
        return None if any(item is None for item in items) else items
    return _plain_leaf(annotation, info, value, param, ctx)


def _plain_leaf(annotation, info, value, param, ctx):
    from typer._param_types import choice_coercion_annotation

    choice = choice_coercion_annotation(annotation, info)
    if choice is not None:  # an Enum or a Literal: before str and int, as the adapter looks
        return _plain_choice(choice, value, ctx)
    if annotation is int or annotation is float:
        return _plain_number(annotation, info, value)
    if annotation is bool and isinstance(value, bool):
        return value
    if annotation is str and type(value) is str:
        return value
    if (
        isinstance(annotation, type)
        and issubclass(annotation, Path)
        and info.path_type is None
        and type(value) is str
        and value
    ):
        from typer._param_types import coerce_cli_path

        return coerce_cli_path(annotation(value), info, path_type=annotation, param=param, ctx=ctx)
    return None


def _plain_choice(choice, value, ctx):
    from typer._param_types import coerce_cli_choice

    choices, case_sensitive = choice
    try:
        return coerce_cli_choice(value, choices=choices, case_sensitive=case_sensitive, ctx=ctx)
    except ValueError:  # not one of them: the adapter says so in its words
        return None


def _plain_number(kind: type, info, value):
    if type(value) is str:
        if not (_INT if kind is int else _FLOAT).fullmatch(value):
            return None
        n = kind(value)
    elif (type(value) is int and abs(value) < 2**53) or (
        kind is float and type(value) is float and math.isfinite(value)
    ):
        n = kind(value)  # a default: the adapter gives an int option's int, a float option's float
    else:
        return None
    low, high = info.min, info.max
    if info.clamp:  # the adapter's clamp: the bound, as the option's type
        if low is not None and n < low:
            return kind(low)
        return kind(high) if high is not None and n > high else n
    if (low is not None and n < low) or (high is not None and n > high):
        return None  # out of bounds: the adapter refuses it, in its words
    return n
