// bench-llama.mjs — llama.cpp's CPU speed on a GGUF file, through
// node-llama-cpp, measured the way `moedesk-cli bench` measures ours:
// per repetition a fresh sequence, a prompt of N random token ids
// evaluated at once (time to its first generated token), then M greedy
// decode steps. Prints one JSON object.
//
//   node tests/bench/bench-llama.mjs MODEL [-p 512] [-n 128] [-t 2] [-r 3]
import path from 'node:path';
import {fileURLToPath} from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const {getLlama} = await import(path.join(here, '..', 'node', 'node_modules', 'node-llama-cpp', 'dist', 'index.js'));

const args = process.argv.slice(2);
const opt = (flag, def) => {
    const i = args.indexOf(flag);
    return i >= 0 ? Number(args[i + 1]) : def;
};
const model = args[0];
const nPrompt = opt('-p', 512), nGen = opt('-n', 128), threads = opt('-t', 2), reps = opt('-r', 3);

const llama = await getLlama({gpu: false, build: 'never', logLevel: 'error'});
const m = await llama.loadModel({modelPath: model, gpuLayers: 0, useMmap: true});
const ctx = await m.createContext({contextSize: nPrompt + nGen + 16, threads, batchSize: nPrompt, sequences: 1});
const nVocab = Number(m.fileInfo.tensorInfo.find(t => t.name === 'token_embd.weight').dimensions[1]);

let seed = 1234;
const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const pp = [], tg = [];
for (let r = 0; r < reps; r++) {
    const seq = ctx.getSequence();
    const prompt = Array.from({length: nPrompt}, () => Math.floor(rand() * nVocab));
    const t0 = performance.now();
    let t1 = 0, count = 0;
    for await (const tok of seq.evaluate(prompt, {temperature: 0})) {
        if (count === 0)
            t1 = performance.now();
        if (++count > nGen)
            break;
    }
    const t2 = performance.now();
    pp.push(nPrompt / ((t1 - t0) / 1000));
    tg.push(nGen / ((t2 - t1) / 1000));
    seq.dispose();
    console.error(`rep ${r + 1}: prefill ${pp[r].toFixed(2)} tok/s, decode ${tg[r].toFixed(2)} tok/s`);
}
const stat = v => {
    const mean = v.reduce((a, b) => a + b, 0) / v.length;
    const sd = v.length > 1 ? Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / (v.length - 1)) : 0;
    return [mean, sd];
};
const [pm, ps] = stat(pp), [tm, ts] = stat(tg);
console.log(JSON.stringify({engine: 'llama.cpp (node-llama-cpp)', model, threads, n_prompt: nPrompt, n_gen: nGen, reps,
    prefill_tok_s: pm, prefill_sd: ps, decode_tok_s: tm, decode_sd: ts}));
await ctx.dispose();
await m.dispose();
