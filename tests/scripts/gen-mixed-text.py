#!/usr/bin/python3
"""gen-mixed-text.py -- deterministic mixed-language text for tokenizer
tests and the tokenizer benchmark.

The text mixes English, Chinese, Japanese, Korean, Russian, Arabic, Hindi,
Greek and Thai prose, source code, JSON, emoji (with skin tones, ZWJ
sequences and flags), numbers in several scripts, contractions in both
cases, whitespace runs of every kind (tabs, CR LF, no-break and ideographic
spaces, U+2028), combining marks, private-use and unassigned code points,
and special-token text (<|im_start|>, </s>, ...), so every pre-tokenizer
branch and the special-token matcher get exercised. The same seed always
gives the same bytes.

usage:
  gen-mixed-text.py text OUT SIZE [SEED]      one UTF-8 text of ~SIZE bytes
  gen-mixed-text.py cases OUT SIZE [SEED] [--invalid] [--whole]
      the text cut into cases in llama.cpp's .inp format (cases separated by
      a line "__ggml_vocab_test__"), 40..3000 bytes each; --invalid splices
      ill-formed UTF-8 into every case (for references that take bytes);
      --whole appends the whole text as one more case.
"""
import random
import sys

PROSE = [
    "The quick brown fox doesn't jump; it's tired, and we'll let it sleep.",
    "I'M SURE THEY'RE RIGHT, BUT YOU'VE GOT TO ADMIT IT'D BE ODD.",
    "Mixture-of-experts models route each token to a few experts out of many.",
    "In 2024, prices rose 3.75% (year over year) — roughly $1,234.56 per unit.",
    "混合专家模型只为每个词元激活少量专家，从而在保持质量的同时降低计算量。",
    "我们在北京和上海的办公室测试了这个模型，结果非常好。",
    "今日は良い天気ですね。ひらがなとカタカナ、そして漢字を混ぜて書きます。",
    "トークナイザーのテストです。東京タワーは高い。",
    "한국어 문장도 포함합니다. 토크나이저가 잘 동작하는지 확인해 봅시다.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Модель обрабатывает 128 000 токенов контекста без проблем.",
    "مرحبا بالعالم، هذا نص عربي لاختبار المقسم. الأرقام: ١٢٣٤٥٦٧٨٩٠",
    "यह एक हिंदी वाक्य है जिसमें मात्राएँ और संयुक्ताक्षर हैं।",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ ซึ่งทำให้การตัดคำยากขึ้น",
    "Ünïcödé façade, naïve café, Ångström, Øresund, ß and ŉ.",
    "e\u0301te\u0301 with combining accents, and a\u0308\u0304 stacked marks.",
]

CODE = [
    "def merge(pairs, ranks):\n    return sorted(pairs, key=lambda p: ranks.get(p, 1e9))\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (size_t i = 0; i < n; i++) { sum += a[i] * b[i]; }  // dot product\n",
    "{\"model\": \"qwen3-30b-a3b\", \"tokens\": [151644, 872, 198], \"ok\": true}\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\r\n",
    "    if x != y and not (a <= b):\n        raise ValueError(f'{x!r} != {y!r}')\n",
    "<div class=\"row\"><span>&nbsp;&lt;tag&gt;</span></div>\n",
    "$ ls -la ~/models | grep -E '\\.gguf$' && echo \"done\" >> log.txt\n",
]

EMOJI = [
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇨🇳", "🇺🇸", "❤️", "🤖", "🚀", "✅", "🎉", "🧑🏿‍💻", "🏳️‍🌈",
]

NUMBERS = [
    "0", "7", "42", "123", "1234", "12345", "3.14159", "1e-9", "-0.5", "100,000",
    "١٢٣", "४५६", "１２３", "Ⅻ", "½", "²³", "0x1F600", "9999999999999999",
]

SPACES = [
    " ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\n ", "  \n\n  ",
    "\u00a0", "\u3000", "\u2028", "\u2009", "\u0085", " \t \n", "\n\n\n\n",
]

SPECIAL = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>",
    "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|fim_prefix|>",
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<|end|>", "<|assistant|>",
    "<|im_start|>assistant\n", "<<|im_end|>>", "< |im_end| >",
]

ODD = [
    "\ue000", "\U000f0000", "\u0378", "\ufffd", "\u200b", "\u200d", "\ufeff", "\u0007",
    "'s", "'T", "'Re", "'ll", "'", "''", "'\u00e9", "\u2019s", "...", "!!!", "?!",
    "a.b.c", "x_y-z", "--", "==", "->", "::", "__init__", "CamelCaseWord", "ALLCAPS",
]

# Ill-formed UTF-8. Nothing here decodes (leniently) above U+10FFFF: llama.cpp
# aborts on such input, so it cannot serve as a reference there.
INVALID = [
    b"\xff", b"\xfe\xfe", b"\x80", b"\xbf\x80", b"\xc3", b"\xe4\xb8", b"\xf0\x9f\x98",
    b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80",
    b"\xe4a", b"a\xc3(b", b"\xf0\x9f\x98\x80\x80",
]


def piece(rng):
    r = rng.random()
    if r < 0.34:
        return rng.choice(PROSE)
    if r < 0.50:
        return rng.choice(CODE)
    if r < 0.58:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))
    if r < 0.68:
        return rng.choice(NUMBERS)
    if r < 0.82:
        return rng.choice(SPACES)
    if r < 0.90:
        return rng.choice(SPECIAL)
    return rng.choice(ODD)


def gen_text(size, seed):
    rng = random.Random(seed)
    out = []
    n = 0
    while n < size:
        p = piece(rng)
        sep = rng.choice(["", " ", " ", " ", "\n", ", ", ". "])
        out.append(p + sep)
        n += len((p + sep).encode("utf-8"))
    return "".join(out).encode("utf-8")


def gen_cases(size, seed, invalid, whole):
    rng = random.Random(seed * 7919 + 1)
    text = gen_text(size, seed)
    cases = []
    pos = 0
    while pos < len(text):
        n = rng.randint(40, 3000)
        end = min(len(text), pos + n)
        # Cut only between characters: back up over continuation bytes.
        while end < len(text) and (text[end] & 0xC0) == 0x80:
            end += 1
        case = text[pos:end]
        if invalid:
            for _ in range(rng.randint(1, 4)):
                at = rng.randint(0, len(case))
                case = case[:at] + rng.choice(INVALID) + case[at:]
        cases.append(case)
        pos = end
    if whole:
        cases.append(text)
    sep = b"\n__ggml_vocab_test__\n"
    return sep.join(cases) + sep


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    if len(args) < 3 or args[0] not in ("text", "cases"):
        sys.exit(__doc__)
    mode, out, size = args[0], args[1], int(args[2])
    seed = int(args[3]) if len(args) > 3 else 1
    if mode == "text":
        data = gen_text(size, seed)
    else:
        data = gen_cases(size, seed, "--invalid" in flags, "--whole" in flags)
    with open(out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
