#!/usr/bin/python3
"""Chat-template conformance: libmoe's renderer against Hugging Face's.

For every template in the shared templates folder and a set of
conversations (one user turn; system+user+assistant+user with and without
add_generation_prompt; tools with assistant tool calls and tool results;
reasoning_content; non-ASCII text; enable_thinking=false; ...), renders
the prompt with libmoe (tests/unit/chat-render-tool.c) and with
@huggingface/jinja (tests/node/render-template.mjs) and compares them byte
for byte.

Where the two differ because libmoe deliberately follows Python Jinja2 /
transformers (the renderer models are trained with) and @huggingface/jinja
does not, the case is listed in KNOWN_DIFFERENCES with the exact text that
differs: the test asserts that replacing each libmoe fragment by the
reference fragment makes the outputs identical, so an undocumented change
in either renderer still fails. Where @huggingface/jinja cannot render a
template at all (REFERENCE_FAILS), the test asserts that it fails with the
recorded message and that libmoe renders it. Where both reject a
conversation (e.g. the template raises for a role order it does not
allow), that is agreement.

    chat-conformance.py --tool BUILD/tests/chat-render-tool \\
        --node node --script tests/node/render-template.mjs \\
        --templates ../shared/data/templates [--jinja2] [--only NAME]

--jinja2 also compares with Python Jinja2 through render-jinja2.py (when
jinja2 is importable; a development aid, not what CI runs).
Prints one line per template and exits 1 on any unexpected result.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# The templates the engine must support fully (the MoE families).
REQUIRED = [
    "Qwen-Qwen3-0.6B.jinja",
    "Qwen3-Coder.jinja",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
    "unsloth-mistral-Devstral-Small-2507.jinja",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja",
    "deepseek-ai-DeepSeek-V3.1.jinja",
    "deepseek-ai-DeepSeek-V3.2.jinja",
    "moonshotai-Kimi-K2.jinja",
    "Kimi-K2-Instruct.jinja",
    "Kimi-K2-Thinking.jinja",
    "openai-gpt-oss-120b.jinja",
]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Paris"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                             "description": "Temperature unit"},
                    "days": {"type": "integer", "description": "Forecast days"},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_docs",
            "description": "Search the documentation.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "filters": {"type": "object", "properties": {"lang": {"type": "string"}}},
                },
                "required": ["query"],
            },
        },
    },
]

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


def conversations():
    """(name, context) pairs; every context names tools and documents
    explicitly, as transformers passes them (None when absent)."""
    base = {"tools": None, "documents": None, "bos_token": "<s>", "eos_token": "</s>"}

    def ctx(messages, agp=True, **extra):
        c = dict(base)
        c["messages"] = messages
        c["add_generation_prompt"] = agp
        c.update(extra)
        return c

    multi = [
        SYSTEM,
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "The capital of France is Paris."},
        {"role": "user", "content": "And of Germany?"},
    ]
    call_obj = {"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}
    call_str = {"id": "call_1", "type": "function",
                "function": {"name": "get_weather",
                             "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}
    tool_conv = lambda call: [  # noqa: E731
        SYSTEM,
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
         "content": "{\"temperature\": 21, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21 °C and clear in Paris."},
        {"role": "user", "content": "Thanks!"},
    ]
    reasoning = [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "2+2 = 4.", "reasoning_content": "Simple arithmetic: two plus two."},
        {"role": "user", "content": "And 3+3?"},
    ]
    return [
        ("single", ctx([{"role": "user", "content": "Hello!"}])),
        ("multi", ctx(multi)),
        ("multi_no_gen", ctx(multi, agp=False)),
        ("no_system", ctx(multi[1:])),
        ("ends_with_assistant", ctx(multi[:3], agp=False)),
        ("tools", ctx(tool_conv(call_obj), tools=TOOLS)),
        ("tools_string_args", ctx(tool_conv(call_str), tools=TOOLS)),
        ("tools_declared_only", ctx([SYSTEM, {"role": "user", "content": "Hi"}], tools=TOOLS)),
        ("reasoning", ctx(reasoning)),
        ("reasoning_last", ctx(reasoning[:2], agp=False)),
        ("think_in_content", ctx([
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "<think>\nThe user greets me.\n</think>\n\nHello!"},
            {"role": "user", "content": "Bye"}])),
        ("unicode", ctx([
            {"role": "system", "content": "Réponds en français. 日本語も大丈夫。"},
            {"role": "user", "content": "Ça va? \"quotes\" and \\backslash\\ and tab\tand emoji 🚀"},
            {"role": "assistant", "content": "Très bien 👍 — merci!"},
            {"role": "user", "content": "Ünïcödé ✓"}])),
        ("parallel_tools", ctx([
            {"role": "user", "content": "Weather in Paris and Oslo?"},
            {"role": "assistant", "content": "Checking both.", "tool_calls": [
                call_obj,
                {"id": "call_2", "type": "function",
                 "function": {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}}]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "21 C"},
            {"role": "tool", "tool_call_id": "call_2", "name": "get_weather", "content": "3 C"},
            {"role": "assistant", "content": "Paris 21 C, Oslo 3 C."}], tools=TOOLS)),
        ("tool_call_null_content", ctx([
            {"role": "user", "content": "Search docs for 'jinja'"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_9", "type": "function",
                 "function": {"name": "search_docs", "arguments": {"query": "jinja", "tags": ["a", "b"]}}}]},
            {"role": "tool", "tool_call_id": "call_9", "content": "found 3 pages"}], tools=TOOLS)),
        ("content_parts", ctx([
            {"role": "user", "content": [{"type": "text", "text": "What is in this image?"},
                                         {"type": "image", "image": "img.png"}]}])),
        ("no_thinking", ctx([{"role": "user", "content": "Hello!"}], enable_thinking=False)),
        ("thinking", ctx(reasoning, enable_thinking=True, thinking=True)),
    ]


# The entries below are keyed (template, case); "*" in either place matches
# every template or every case. All entries that match are tried.

# Differences that are libmoe following Python Jinja2 on purpose, with the
# exact text: libmoe's output with each libmoe fragment replaced by the
# reference fragment must equal the reference output.
PY_REPR_PARTS = ("[{'type': 'text', 'text': 'What is in this image?'}, {'type': 'image', 'image': 'img.png'}]",
                 '[{"type": "text", "text": "What is in this image?"}, {"type": "image", "image": "img.png"}]')
KNOWN_DIFFERENCES = {
    # `"..."|safe + t|tojson`: in Python the |safe string is a Markup, and
    # Markup + str HTML-escapes the str (even with autoescape off), so the
    # tool JSON's quotes become &#34; in the prompt transformers builds.
    # @huggingface/jinja has no Markup and leaves them.
    ("meetkai-functionary-medium-v3.1.jinja", "*"): [("&#34;", '"')],
    # {{ content }} with content None prints "None" in Python, nothing in
    # @huggingface/jinja.
    ("GLM-4.6.jinja", "tool_call_null_content"): [("<think></think>\nNone\n", "<think></think>\n")],
    ("GLM-4.7-Flash.jinja", "tool_call_null_content"): [("</think>None<tool_call>", "</think><tool_call>")],
    ("MiniMax-M2.jinja", "tool_call_null_content"): [("ai\nNone\n<minimax:", "ai\n\n<minimax:")],
    # {{ content }} with content a list prints Python's repr, not JSON.
    ("*", "content_parts"): [PY_REPR_PARTS],
}

# Conversations @huggingface/jinja cannot render (features it lacks), with
# a fragment of its error. libmoe either renders them or rejects them too
# (e.g. a template raising).
REFERENCE_FAILS = {
    # dict literal with integer keys
    ("ByteDance-Seed-OSS.jinja", "*"): "Object keys must be strings",
    # str.format()
    ("tencent-Hy3.jinja", "*"): "Cannot call something that is not a function",
    # list.append / list.pop (transformers' immutable sandbox refuses them
    # too; llama.cpp allows them; libmoe's output was checked against
    # Python Jinja2's mutable sandbox: render-jinja2.py --mutable)
    ("Kimi-K2-Instruct.jinja", "*"): "Cannot call something that is not a function: got UndefinedValue",
    ("Kimi-K2-Thinking.jinja", "*"): "Cannot call something that is not a function: got UndefinedValue",
    # the from_json filter (not in transformers either; vLLM has it)
    ("deepseek-ai-DeepSeek-V3.2.jinja", "tools_string_args"): "Unknown StringValue filter: from_json",
    ("deepseek-ai-DeepSeek-V4.jinja", "tools_string_args"): "Unknown StringValue filter: from_json",
    ("deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "tools_string_args"): "Unknown StringValue filter: from_json",
    # none|selectattr(...): Jinja2 yields nothing for a false value
    ("meetkai-functionary-medium-v3.1.jinja", "*"): "Cannot apply filter \"selectattr\" to type: NullValue",
    # for k, v in d|dictsort (pairs are tuples)
    ("meetkai-functionary-medium-v3.2.jinja", "*"): "Cannot unpack non-iterable type: TupleValue",
    # |string and |min on containers
    ("Apriel-1.6-15b-Thinker-fixed.jinja", "*"): "Unknown ObjectValue filter: string",
    ("unsloth-Apriel-1.5.jinja", "*"): "Unknown ObjectValue filter: string",
    ("openbmb-MiniCPM5-1B.jinja", "*"): "Unknown ArrayValue filter: min",
    # calling a dict method through a variable
    ("GigaChat3-10B-A1.8B.jinja", "*"): "Cannot call something that is not a function: got ObjectValue",
    ("GigaChat3.1-10B-A1.8B.jinja", "*"): "Cannot call something that is not a function: got ObjectValue",
    # indexing with an undefined key
    ("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "*"): "Cannot access property with non-string: got UndefinedValue",
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "*"): "Cannot access property with non-string: got UndefinedValue",
    # list|trim (Python trims str(list)) and str * int
    ("*", "content_parts"): "Unknown ArrayValue filter: trim",
    ("Reka-Edge.jinja", "content_parts"): 'Unknown operator "*" between StringValue and IntegerValue',
}

# Conversations Python Jinja2 rejects and @huggingface/jinja renders;
# libmoe rejects them as Python does, with this error fragment.
PYTHON_REJECTS = {
    # tools|map(...)|tojson: map() is a generator, json.dumps cannot
    # serialise it (TypeError in transformers)
    ("llama-cpp-deepseek-r1.jinja", "*"): "Object of type generator is not JSON serializable",
    # 'text' + content where content is a list of parts (or a dict): a
    # TypeError in Python; @huggingface/jinja concatenates JSON text
    ("*", "content_parts"): 'can only concatenate str (not "list") to str',
    ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "tool_call_null_content"):
        'can only concatenate str (not "dict") to str',
}


def lookup(table, template, case):
    """Every entry that applies, most specific first."""
    keys = [(template, case), (template, "*"), ("*", case)]
    return [table[k] for k in keys if k in table]


def run(cmd, cwd=None):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace").strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--node", default="node")
    ap.add_argument("--script", required=True)
    ap.add_argument("--templates", required=True)
    ap.add_argument("--jinja2", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    names = sorted(f for f in os.listdir(args.templates) if f.endswith(".jinja"))
    for r in REQUIRED:
        if r not in names:
            print(f"FAIL required template {r} missing from {args.templates}")
            return 1
    if args.only:
        names = [n for n in names if args.only in n]
    cases = conversations()
    work = tempfile.mkdtemp(prefix="moe-chat-conf-")
    jobs = []
    for ci, (cname, context) in enumerate(cases):
        cpath = os.path.join(work, f"ctx-{cname}.json")
        with open(cpath, "w", encoding="utf-8") as f:
            json.dump(context, f, ensure_ascii=False)
        for ti, t in enumerate(names):
            jobs.append({"template": os.path.join(args.templates, t), "context": cpath,
                         "output": os.path.join(work, f"ref-{ti}-{ci}.txt"),
                         "tname": t, "cname": cname, "ti": ti, "ci": ci})
    manifest = os.path.join(work, "manifest.json")
    with open(manifest, "w", encoding="utf-8") as f:
        json.dump([{k: j[k] for k in ("template", "context", "output")} for j in jobs], f)
    rc, _, err = run([args.node, os.path.abspath(args.script), "--batch", manifest],
                     cwd=os.path.dirname(os.path.abspath(args.script)))
    if rc != 0:
        print(f"FAIL node renderer: {err}")
        return 1

    failures = 0
    per_template = {t: {"same": 0, "known": 0, "both_reject": 0, "ref_fails": 0, "py_rejects": 0, "bad": []}
                    for t in names}
    for j in jobs:
        t, cname = j["tname"], j["cname"]
        rec = per_template[t]
        rc, ours, our_err = run([args.tool, j["template"], j["context"]])
        ref_err = None
        if os.path.exists(j["output"] + ".err"):
            with open(j["output"] + ".err", encoding="utf-8") as f:
                ref_err = f.read()
            ref = None
        else:
            with open(j["output"], "rb") as f:
                ref = f.read()
        if args.jinja2:
            j2 = [sys.executable, os.path.join(os.path.dirname(__file__), "render-jinja2.py")]
            prc, py, py_err = run(j2 + [j["template"], j["context"]])
            if prc != 0 and "SecurityError" in py_err:
                prc, py, py_err = run(j2 + ["--mutable", j["template"], j["context"]])
            if prc != 0 and "No filter named 'from_json'" in py_err and rc == 0:
                pass  # libmoe's from_json extension; transformers lacks it
            elif (prc == 0) != (rc == 0) or (rc == 0 and py != ours):
                rec["bad"].append(f"{cname}: differs from Python Jinja2 ({py_err or 'output'})")
        if ref is None:
            if any(frag in ref_err for frag in lookup(REFERENCE_FAILS, t, cname)):
                rec["ref_fails" if rc == 0 else "both_reject"] += 1
            elif rc != 0:
                rec["both_reject"] += 1
                if args.verbose:
                    print(f"  {t} {cname}: both reject: {our_err} | {ref_err}")
            else:
                rec["bad"].append(f"{cname}: libmoe ok, reference error: {ref_err}")
            continue
        if rc != 0:
            if any(frag in our_err for frag in lookup(PYTHON_REJECTS, t, cname)):
                rec["py_rejects"] += 1
            else:
                rec["bad"].append(f"{cname}: libmoe error: {our_err}, reference ok")
            continue
        if ours == ref:
            rec["same"] += 1
            continue
        known = lookup(KNOWN_DIFFERENCES, t, cname)
        if known:
            # each applicable entry alone, then all of them together
            candidates = known + [[pair for entry in known for pair in entry]]
            matched = False
            for pairs in candidates:
                patched = ours.decode("utf-8")
                for a, b in pairs:
                    patched = patched.replace(a, b)
                matched = matched or patched.encode("utf-8") == ref
            if matched:
                rec["known"] += 1
                continue
            rec["bad"].append(f"{cname}: differs beyond the documented difference")
        else:
            rec["bad"].append(f"{cname}: output differs")
        if args.verbose:
            o, r = ours.decode("utf-8", "replace"), ref.decode("utf-8", "replace")
            k = next((i for i in range(min(len(o), len(r))) if o[i] != r[i]), min(len(o), len(r)))
            print(f"  {t} {cname}: first difference at char {k}:\n    ours: {o[max(0, k - 60):k + 80]!r}\n"
                  f"    ref:  {r[max(0, k - 60):k + 80]!r}")

    full = []
    for t in names:
        rec = per_template[t]
        status = "PASS" if not rec["bad"] else "FAIL"
        if rec["bad"]:
            failures += 1
        elif rec["same"] == len(cases):
            full.append(t)
        req = " (required)" if t in REQUIRED else ""
        print(f"{status} {t}{req}: {rec['same']} identical, {rec['known']} documented differences, "
              f"{rec['both_reject']} rejected by both, {rec['ref_fails']} reference cannot render, "
              f"{rec['py_rejects']} rejected as Python does")
        for b in rec["bad"]:
            print(f"     {b}")
    print(f"{len(names) - failures}/{len(names)} templates pass; identical in every case: {len(full)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
