"""The CLI coerces the plain option values (a path, a string, a flag, a number, a choice, lists of
them) without typer's pydantic adapter, which costs ~0.2 s of CPU to import: the result, and the
error for a value typer's checks refuse, must be the adapter's for every such parameter of every
command; a value the adapter refuses is left to it (its words in the error)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer._coercion import build_runtime_param

from ledgertool.cli.app import click_command
from ledgertool.cli.coercion import plain_value


def _walk(root):
    out = []

    def walk(cmd, path):
        for p in cmd.params:
            if hasattr(p, "type_descriptor"):
                out.append((f"{path} {p.name}", cmd, p))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(root, "ledgertool")
    return out


ROOT = click_command()
PARAMS = _walk(ROOT)


class Colour(Enum):
    RED = "red"
    GREEN = "green"


def _choices(
    colour: Annotated[Colour, typer.Option()] = Colour.RED,
    loose: Annotated[Colour, typer.Option(case_sensitive=False)] = Colour.GREEN,
    mode: Annotated[Literal["fast", "safe"], typer.Option()] = "safe",
    colours: Annotated[list[Colour] | None, typer.Option()] = None,
    clamped: Annotated[int, typer.Option(min=0, max=10, clamp=True)] = 3,
    clamped_x: Annotated[float, typer.Option(min=0, max=2.5, clamp=True)] = 1.0,
    bounded: Annotated[int, typer.Option(min=-3, max=3)] = 0,
    ratio: Annotated[float, typer.Option(max=1)] = 0.5,
) -> None:
    """Parameters of the kinds no ledgertool command has (yet): enums, literals, clamps."""


_extra = typer.Typer()
_extra.command("choices")(_choices)
_extra.command("other")(lambda: None)
EXTRA = [c for c in _walk(typer.main.get_command(_extra)) if c[0].startswith("ledgertool choices")]

NUMBERS = [
    *("0", "1", "-1", "+7", "007", "-0", "3", "4", "10", "11", "4096", "4097", "1000000"),
    *("0.0001", "0.00001", "1.5", "-1.5", "1e3", "1E-4", ".5", "5.", "2.50", "1e99", "1e999"),
    *("x", "", " 5", "5 ", "1_000", "0x10", "\u0661\u0662", "inf", "-inf", "nan", "1e", "e3"),
    *("99999999999999999999", "123456789012345678", "1234567890123456789", "--1", "+-1"),
    *(0, 3, -4, 11, 2**60, 0.5, 3.0, 2.75, float("inf"), True),
]
CHOICES = ["red", "RED", "Red", "green", "blue", "", "fast", "FAST", "safe", Colour.RED]


def _kind(p):
    a = p.type_descriptor.annotation
    return (typing_args[0] if (typing_args := getattr(a, "__args__", None)) else a), a


def _values(p):
    leaf, annotation = _kind(p)
    many = p.nargs != 1 or p.multiple
    if annotation is bool:
        return [True, False]
    if leaf in (int, float):
        return [("1", "2"), ("1", "x"), ("-", "0.5")] if many else [*NUMBERS, p.default]
    if p.type_descriptor.is_choice:
        return [("red", "green"), ("red", "blue"), ("GREEN",)] if many else [*CHOICES, p.default]
    return [("a.pcap", "dir/b"), ("-",)] if many else ["x.key", "-", "."]


def _outcome(f):
    try:
        return "value", f()
    except Exception as e:  # noqa: BLE001  (the adapter's refusal: typer's BadParameter)
        return type(e).__name__, e.format_message() if hasattr(e, "format_message") else str(e)


def _types(v):
    return [type(x) for x in v] if isinstance(v, list | tuple) else type(v)


def _same_as_adapter(cmd, param, value) -> bool:
    """Whether the plain coercion took `value`; fails where it differs from the adapter."""
    ctx = typer.Context(cmd)
    real = build_runtime_param(param.type_descriptor)
    want = _outcome(lambda: real.coerce(value, param=param, ctx=ctx))
    got = _outcome(lambda: plain_value(param.type_descriptor, value, param, ctx))
    if got == ("value", None):  # not a plain value: the adapter coerces it
        return False
    assert got == want, (value, got, want)
    assert _types(got[1]) == _types(want[1]), (value, got, want)
    return got[0] == "value"


@pytest.mark.parametrize("name,cmd,param", PARAMS + EXTRA, ids=[n for n, _, _ in PARAMS + EXTRA])
def test_plain_coercion_is_the_adapters(name, cmd, param, tmp_path):
    for value in _values(param):
        if value is not None:
            _same_as_adapter(cmd, param, value)


def _plain_ones(params):
    return [n for n, cmd, p in params if any(_same_as_adapter(cmd, p, v) for v in _values(p) if v)]


def test_some_parameters_take_the_plain_coercion():
    plain = _plain_ones(PARAMS)
    assert "ledgertool verify ledgers" in plain
    assert "ledgertool verify trust" in plain
    # numbers: an int with a lower bound, a float with one, a list of ints
    assert "ledgertool capture segment_records" in plain
    assert "ledgertool capture ring_mb" in plain
    assert "ledgertool bench min_time" in plain
    assert "ledgertool plan collision bits" in plain
    # every enum, literal and clamped or bounded number
    assert len(_plain_ones(EXTRA)) == len(EXTRA) == 8


@pytest.mark.parametrize(
    "name,value,want",
    [
        ("segment_records", "100", 100),
        ("segment_records", "+007", 7),
        ("segment_records", 1000000, 1000000),
        ("ring_mb", "64", 64.0),
        ("ring_mb", 64.0, 64.0),
        ("ring_mb", "1e3", 1000.0),
        ("segment_seconds", "-.5", -0.5),
    ],
)
def test_numbers_known_answers(name, value, want):
    (cmd,) = [c for n, c, _ in PARAMS if n == f"ledgertool capture {name}"]
    param = next(p for p in cmd.params if p.name == name)
    got = plain_value(param.type_descriptor, value, param, typer.Context(cmd))
    assert got == want and type(got) is type(want)
    assert _same_as_adapter(cmd, param, value)


def test_numbers_refused_are_left_to_the_adapter():
    (cmd,) = {c for n, c, _ in PARAMS if n.startswith("ledgertool capture ")}
    param = next(p for p in cmd.params if p.name == "segment_records")  # min 1
    for value in ("0", "-3", "1.5", "x", " 5", "1_000", 0):
        assert plain_value(param.type_descriptor, value, param, typer.Context(cmd)) is None


def test_choices_known_answers():
    by_name = {p.name: (cmd, p) for _, cmd, p in EXTRA}
    for name, value, want in [
        ("colour", "red", Colour.RED),
        ("colour", Colour.GREEN, Colour.GREEN),
        ("loose", "GREEN", Colour.GREEN),
        ("mode", "fast", "fast"),
        ("clamped", "15", 10),
        ("clamped", "-2", 0),
        ("clamped_x", "9", 2.5),
        ("clamped_x", "-1", 0.0),  # the bound as the option's type: 0.0, not 0
        ("bounded", "-3", -3),
    ]:
        cmd, p = by_name[name]
        got = plain_value(p.type_descriptor, value, p, typer.Context(cmd))
        assert got == want and type(got) is type(want), (name, value, got)
    cmd, p = by_name["colour"]
    assert plain_value(p.type_descriptor, "RED", p, typer.Context(cmd)) is None  # case-sensitive
    cmd, p = by_name["bounded"]
    assert plain_value(p.type_descriptor, "4", p, typer.Context(cmd)) is None


NUMBER_PARAMS = [(n, c, p) for n, c, p in PARAMS + EXTRA if _kind(p)[1] in (int, float)]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(NUMBER_PARAMS),
    st.text(alphabet="0123456789+-.eE_ x", max_size=12) | st.integers() | st.floats(),
)
def test_numbers_agree_with_the_adapter(param_case, value):
    _, cmd, param = param_case
    _same_as_adapter(cmd, param, value)
