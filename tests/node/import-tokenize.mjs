// import-tokenize.mjs — llama.cpp tokenizes the same way with a GGUF that
// `moedesk-cli import` wrote as with the one llama.cpp's converter would
// write (the "direct" file from tests/scripts/gen_hf_checkpoint.py).
//
// Loads both files vocabulary-only in node-llama-cpp and compares, for
// every test string, the tokens with and without special-token parsing,
// the detokenised text, and the special token ids (BOS, EOS, EOT, NL).
// The strings are the vocabulary's own .inp cases plus chat-shaped text
// with the tokenizer's control tokens.
//   usage: node import-tokenize.mjs DIRECT.gguf IMPORTED.gguf INPUTS.inp
//   exit status 0 when everything matched; differences go to stderr.
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [directPath, importedPath, inpPath] = process.argv.slice(2);
if (!directPath || !importedPath || !inpPath) {
    console.error("usage: node import-tokenize.mjs DIRECT.gguf IMPORTED.gguf INPUTS.inp");
    process.exit(2);
}

const inputs = fs.readFileSync(inpPath, "utf8").split("\n__ggml_vocab_test__\n");
inputs.push("Hello world", " leading space", "<|im_start|>user\nhi<|im_end|>\n",
    "<s>[INST] What is 2+2? [/INST]</s>", "<think>\nok\n</think>", "tabs\tand\nnewlines\r\n",
    "数字 12345 and émoji 🦙", "");

let failures = 0;
function check(ok, what) {
    if (!ok) {
        failures++;
        console.error("FAIL: " + what);
    }
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const direct = await llama.loadModel({modelPath: directPath, vocabOnly: true});
const imported = await llama.loadModel({modelPath: importedPath, vocabOnly: true});
for (const text of inputs) {
    for (const special of [false, true]) {
        const a = Array.from(direct.tokenize(text, special));
        const b = Array.from(imported.tokenize(text, special));
        check(same(a, b), `tokens (special=${special}) differ for ${JSON.stringify(text.slice(0, 40))}:` +
            ` ${a.slice(0, 12)} vs ${b.slice(0, 12)}`);
        if (same(a, b))
            check(direct.detokenize(a, special) === imported.detokenize(b, special),
                `detokenize differs for ${JSON.stringify(text.slice(0, 40))}`);
    }
}
for (const k of ["bos", "eos", "eot", "nl"])
    check(direct.tokens[k] === imported.tokens[k], `special token ${k}: ${direct.tokens[k]} vs ${imported.tokens[k]}`);
check(direct.tokens.shouldPrependBosToken === imported.tokens.shouldPrependBosToken, "add_bos differs");
await imported.dispose();
await direct.dispose();
console.log(`${inputs.length} strings compared, ${failures} failures`);
process.exit(failures ? 1 : 0);
