// quantized-model.mjs — llama.cpp (node-llama-cpp, CPU) loads and runs the
// models libmoe's moe_model_quantize writes, and their next-token
// distributions stay close to the F32 original's.
//
//   node quantized-model.mjs MAKE_TINY_LLAMA VOCAB.gguf TYPE...
//
// MAKE_TINY_LLAMA (tests/tools/make-tiny-llama.c) writes a 1-layer llama
// around VOCAB's vocabulary as F32 and quantises it to each TYPE with
// moe_model_quantize, into a temporary folder removed afterwards. For each
// prompt the F32 and quantised models' next-token probabilities are
// compared: total variation distance under a per-type bound, and the most
// likely token the same for the 16- and 8-bit types. Exit status 0 when
// every check holds.
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

// Measured on this model (llama.cpp also quantises activations, which adds
// to the weights' error): f16 ~0.001, bf16 ~0.01, q8_0 ~0.02-0.04, q6_k
// ~0.05-0.07, q4_k ~0.12-0.21, q4_0 ~0.17-0.25; bounds leave room for other
// CPUs' kernels. A wrong block layout scrambles the weights and gives ~0.9.
const TV_BOUND = {f16: 0.005, bf16: 0.03, q8_0: 0.08, q6_k: 0.15, q4_k: 0.35, q4_0: 0.45};
const SAME_TOP = new Set(["f16", "bf16", "q8_0"]);
const PROMPTS = ["The quick brown fox", "Hello, world!", "1 2 3 4 5", "def main():"];

const [tool, vocab, ...types] = process.argv.slice(2);
if (!tool || !vocab || types.length === 0) {
    console.error("usage: node quantized-model.mjs MAKE_TINY_LLAMA VOCAB.gguf TYPE...");
    process.exit(2);
}
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "moe-tiny-llama-"));
const prefix = path.join(dir, "tiny");
process.on("exit", () => fs.rmSync(dir, {recursive: true, force: true}));
execFileSync(tool, [vocab, prefix, ...types], {stdio: "inherit"});

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});

async function nextTokenProbs(path) {
    const model = await llama.loadModel({modelPath: path, gpuLayers: 0});
    const out = [];
    for (const prompt of PROMPTS) {
        const context = await model.createContext({contextSize: 64, threads: 1});
        const seq = context.getSequence();
        const tokens = model.tokenize(prompt);
        const gen = seq.evaluateWithMetadata(tokens, {probabilities: true}, {temperature: 0});
        const first = (await gen.next()).value;
        await gen.return();
        out.push(first.probabilities);
        await context.dispose();
    }
    await model.dispose();
    return out;
}

function totalVariation(p, q) {
    let sum = 0;
    const keys = new Set([...p.keys(), ...q.keys()]);
    for (const k of keys)
        sum += Math.abs((p.get(k) ?? 0) - (q.get(k) ?? 0));
    return sum / 2;
}

function top(p) {
    return p.entries().next().value[0];
}

let failures = 0;
const ref = await nextTokenProbs(`${prefix}-f32.gguf`);
for (const type of types) {
    const got = await nextTokenProbs(`${prefix}-${type}.gguf`);
    for (let i = 0; i < PROMPTS.length; i++) {
        const tv = totalVariation(ref[i], got[i]);
        const sameTop = top(ref[i]) === top(got[i]);
        const ok = tv <= TV_BOUND[type] && (sameTop || !SAME_TOP.has(type));
        console.log(`${type} "${PROMPTS[i]}": tv ${tv.toFixed(5)}, top ${top(got[i])}` +
                    ` (f32 ${top(ref[i])}) ${ok ? "ok" : "FAIL"}`);
        if (!ok)
            failures++;
    }
}
await llama.dispose();
console.log(failures ? `${failures} failures` : "all checks passed");
process.exit(failures ? 1 : 0);
