// gguf-interop.mjs — llama.cpp reads GGUF files written by libmoe.
//
// Copies a vocabulary GGUF through libmoe (tests/tools/gguf-copy: every
// key/value via copy_kv, plus two tensors and extra keys), then loads the
// original and the copy in llama.cpp (node-llama-cpp, CPU, vocab only) and
// checks that both tokenize every test string identically. Loading also
// runs llama.cpp's own GGUF validation (tensor offsets must be exactly the
// running sum of padded sizes). node-llama-cpp's separate JS GGUF parser
// then checks the tensor infos and metadata.
//   usage: node gguf-interop.mjs GGUF_COPY_EXE VOCAB.gguf OUT_DIR
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {getLlama, readGgufFileInfo} from "node-llama-cpp";

const [copyExe, source, outDir] = process.argv.slice(2);
if (!copyExe || !source || !outDir) {
    console.error("usage: node gguf-interop.mjs GGUF_COPY_EXE VOCAB.gguf OUT_DIR");
    process.exit(2);
}
fs.mkdirSync(outDir, {recursive: true});
const copy = path.join(outDir, "interop-" + path.basename(source));
execFileSync(copyExe, [source, copy], {stdio: "inherit"});

let failures = 0;
function check(ok, what) {
    if (!ok) {
        failures++;
        console.error("FAIL: " + what);
    }
}

// The test strings that ship with the vocabulary.
const inputs = fs.readFileSync(source + ".inp", "utf8").split("\n__ggml_vocab_test__\n");
inputs.push("Hello world", " leading space", "<|im_start|>user\nhi<|im_end|>", "");
check(inputs.length > 10, "too few test strings");

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const original = await llama.loadModel({modelPath: source, vocabOnly: true});
const ours = await llama.loadModel({modelPath: copy, vocabOnly: true});
for (const text of inputs) {
    const a = Array.from(original.tokenize(text, false));
    const b = Array.from(ours.tokenize(text, false));
    check(JSON.stringify(a) === JSON.stringify(b),
        `tokens differ for ${JSON.stringify(text.slice(0, 40))}: ${a.slice(0, 8)} vs ${b.slice(0, 8)}`);
}
check(original.tokens.bos === ours.tokens.bos && original.tokens.eos === ours.tokens.eos,
    "special tokens differ");
await ours.dispose();
await original.dispose();

// node-llama-cpp's own JS parser reads the tensor infos we wrote.
const info = await readGgufFileInfo(copy, {logWarnings: false});
const tensors = new Map(info.fullTensorInfo.map((t) => [t.name, t]));
const f32 = tensors.get("interop.f32"), q8 = tensors.get("interop.q8_0");
check(f32 && f32.dimensions.map(Number).join(",") === "8,3" && f32.ggmlType === 0,
    "interop.f32 info: " + JSON.stringify(f32, (k, v) => typeof v === "bigint" ? v.toString() : v));
check(q8 && q8.dimensions.map(Number).join(",") === "64,2" && q8.ggmlType === 8,
    "interop.q8_0 info");
check(f32 && q8 && Number(f32.offset) === 0 && Number(q8.offset) === 96,
    "tensor offsets (want 0 and 96: 96 bytes of f32 need no padding at alignment 32)");
check(info.metadata.moedesk.test.str === "h\u00e9llo", "moedesk.test.str");
check(info.metadata.moedesk.test.arr_str.join("|") === "a||\u4e2d", "moedesk.test.arr_str");

fs.rmSync(copy);
console.log(`${inputs.length} strings compared, ${failures} failures`);
process.exit(failures ? 1 : 0);
