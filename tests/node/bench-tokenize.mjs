// bench-tokenize.mjs — llama.cpp's tokenizer throughput on the same text as
// tests/bench/bench-tokenize.c, through node-llama-cpp (the llama.cpp build
// its npm package ships). Only the tokenize call is timed, after a warm-up;
// the text is converted to a JavaScript string once, outside the timing.
//
//   node bench-tokenize.mjs VOCAB.gguf TEXT [RUNS]
import {readFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [vocabPath, textPath, runsArg] = process.argv.slice(2);
if (!textPath) {
  console.error("usage: node bench-tokenize.mjs VOCAB.gguf TEXT [RUNS]");
  process.exit(2);
}
const runs = Number(runsArg ?? 7);
const bytes = readFileSync(textPath);
const text = bytes.toString("utf8");

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
let t0 = process.hrtime.bigint();
const model = await llama.loadModel({modelPath: vocabPath, vocabOnly: true});
const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;

let ids = model._model.tokenize(text, false); // warm-up
const times = [];
for (let r = 0; r < runs; r++) {
  t0 = process.hrtime.bigint();
  ids = model._model.tokenize(text, false);
  times.push(Number(process.hrtime.bigint() - t0) / 1e9);
}
times.sort((a, b) => a - b);
const med = times[Math.floor(runs / 2)], best = times[0];
console.log(`vocabulary load: ${loadMs.toFixed(1)} ms (node-llama-cpp, vocab only)`);
console.log(`text: ${bytes.length} bytes -> ${ids.length} tokens`);
console.log(`tokenize: median ${(med * 1e3).toFixed(1)} ms = ${(bytes.length / med / 1e6).toFixed(2)} MB/s ` +
            `(best ${(best * 1e3).toFixed(1)} ms = ${(bytes.length / best / 1e6).toFixed(2)} MB/s) over ${runs} runs`);
await model.dispose();
await llama.dispose();
