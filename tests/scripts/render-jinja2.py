#!/usr/bin/python3
"""Renders a chat template with Python Jinja2 the way Hugging Face
transformers does (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, its own tojson, raise_exception,
strftime_now, the {% generation %} tag).

A development aid: Python Jinja2 is the ground truth libmoe follows, but it
is not installed where CI runs (Debian's python3 has no jinja2), so the
automated conformance test compares with @huggingface/jinja instead, and
chat-conformance.py --jinja2 adds this renderer when jinja2 is importable.

    render-jinja2.py [--mutable] TEMPLATE.jinja CONTEXT.json  -> prompt on stdout

--mutable uses SandboxedEnvironment, which allows list.append/pop (as
llama.cpp and libmoe do) where transformers' immutable sandbox refuses.
"""
import json
import sys
from datetime import datetime, timezone

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

PINNED = datetime(2024, 7, 26, 12, 0, 0, tzinfo=timezone.utc).astimezone()


class GenerationTag(Extension):
    """transformers' AssistantTracker, minus the index bookkeeping."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env(mutable=False):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return PINNED.strftime(fmt)

    cls = SandboxedEnvironment if mutable else ImmutableSandboxedEnvironment
    env = cls(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    argv = sys.argv[1:]
    mutable = bool(argv) and argv[0] == "--mutable"
    if mutable:
        argv = argv[1:]
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        source = f.read()
    with open(argv[1], encoding="utf-8") as f:
        context = json.load(f)
    try:
        out = make_env(mutable).from_string(source).render(**context)
    except Exception as e:  # noqa: BLE001 - report any template failure
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
