"""The CLI coerces the plain option values (a path, a string, a flag, lists of them) without
typer's pydantic adapter, which costs ~0.2 s of CPU to import: the result, and the error for a
path typer's checks refuse, must be the adapter's for every such parameter of every command."""

from __future__ import annotations

import pytest
import typer
from typer._coercion import build_runtime_param

from ledgertool.cli.app import _plain_value, click_command


def _params():
    root = click_command()
    out = []

    def walk(cmd, path):
        for p in cmd.params:
            if hasattr(p, "type_descriptor"):
                out.append((f"{path} {p.name}", cmd, p))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(root, "ledgertool")
    return root, out


ROOT, PARAMS = _params()


def _values(p):
    if p.type_descriptor.annotation is bool:
        return [True, False]
    return [("a.pcap", "dir/b"), ("-",)] if p.nargs != 1 or p.multiple else ["x.key", "-", "."]


@pytest.mark.parametrize("name,cmd,param", PARAMS, ids=[n for n, _, _ in PARAMS])
def test_plain_coercion_is_the_adapters(name, cmd, param, tmp_path):
    ctx = typer.Context(cmd)
    real = build_runtime_param(param.type_descriptor)
    for value in _values(param):
        got = _plain_value(param.type_descriptor, value, param, ctx)
        if got is None:  # not a plain value: the adapter coerces it
            continue
        assert got == real.coerce(value, param=param, ctx=ctx)
        assert type(got) is type(real.coerce(value, param=param, ctx=ctx))


def test_some_parameters_take_the_plain_coercion():
    plain = [
        n
        for n, cmd, p in PARAMS
        if any(
            _plain_value(p.type_descriptor, v, p, typer.Context(cmd)) is not None
            for v in _values(p)
        )
    ]
    assert "ledgertool verify ledgers" in plain
    assert "ledgertool verify trust" in plain
