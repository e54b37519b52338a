// llama-logits.mjs: runs a GGUF model through llama.cpp (node-llama-cpp) and
// writes its next-token distribution at every position of a token sequence,
// plus a greedy continuation. MoeDesk's Python reference (tests/scripts/
// ref_forward.py) and the C engine are compared against these numbers, so
// llama.cpp is the third, independent implementation.
//
// node-llama-cpp 3.21 exposes no raw logits, but controlledEvaluate() with
// generateNext.probabilities returns the softmax over the whole vocabulary
// after the sampler chain; at temperature 0 that chain is only the greedy
// picker, which leaves the logits untouched, so these are the model's plain
// softmax(logits). log(p) equals the logits up to a per-position constant.
//
// usage: node llama-logits.mjs --model FILE --tokens 1,2,3 --probs OUT.f32
//            [--generate N] [--threads N]
//   OUT.f32: float32 little-endian [n_tokens, n_vocab] row-major,
//            row i = P(next token | tokens[0..i]).
//   stdout:  JSON {n_vocab, n_tokens, top1: [...], generated: [...]}.
// The KV cache is F32 and flash attention off, so an F32 model is evaluated
// in F32 end to end.
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

function parseArgs(argv) {
    const args = {generate: 0, threads: 2};
    for (let i = 0; i < argv.length; i++) {
        const key = argv[i];
        const val = argv[i + 1];
        if (val === undefined)
            throw new Error(`option ${key} needs a value`);
        i++;
        if (key === "--model") args.model = val;
        else if (key === "--tokens") args.tokens = val.split(",").filter((s) => s !== "").map(Number);
        else if (key === "--probs") args.probs = val;
        else if (key === "--generate") args.generate = Number(val);
        else if (key === "--threads") args.threads = Number(val);
        else throw new Error(`unknown option ${key}`);
    }
    if (!args.model || !args.tokens || args.tokens.length === 0)
        throw new Error("usage: llama-logits.mjs --model FILE --tokens 1,2,3 [--probs OUT.f32] [--generate N]");
    if (args.tokens.some((t) => !Number.isInteger(t) || t < 0))
        throw new Error("--tokens: expected comma-separated non-negative integers");
    return args;
}

async function main() {
    const args = parseArgs(process.argv.slice(2));
    const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error,
                                  progressLogs: false, maxThreads: args.threads});
    const model = await llama.loadModel({modelPath: args.model, gpuLayers: 0});
    const ctxSize = Math.max(64, args.tokens.length + args.generate + 8);
    const context = await model.createContext({
        contextSize: ctxSize,
        batchSize: ctxSize,
        flashAttention: false,
        threads: args.threads,
        experimentalKvCacheKeyType: "F32",
        experimentalKvCacheValueType: "F32",
    });
    const seq = context.getSequence();
    const greedy = {temperature: 0};

    // Teacher forcing: one batch with a distribution requested at every position.
    const input = args.tokens.map((t) => [t, {generateNext: {probabilities: true, token: true, options: greedy}}]);
    const out = await seq.controlledEvaluate(input);

    let vocab = 0;
    for (const o of out)
        if (o?.next?.probabilities) vocab = Math.max(vocab, o.next.probabilities.size);
    const probs = new Float32Array(args.tokens.length * vocab);
    const top1 = [];
    for (let i = 0; i < args.tokens.length; i++) {
        const p = out[i]?.next?.probabilities;
        if (!p) throw new Error(`no probabilities returned for position ${i}`);
        if (p.size !== vocab) throw new Error(`position ${i}: ${p.size} probabilities, expected ${vocab}`);
        for (const [tok, prob] of p) probs[i * vocab + tok] = prob;
        top1.push(out[i].next.token);
    }
    if (args.probs)
        fs.writeFileSync(args.probs, Buffer.from(probs.buffer));

    // Greedy continuation: feed back each argmax token.
    const generated = [];
    let next = top1[top1.length - 1];
    for (let n = 0; n < args.generate; n++) {
        generated.push(next);
        if (n + 1 === args.generate) break;
        const res = await seq.controlledEvaluate([[next, {generateNext: {token: true, options: greedy}}]]);
        next = res[0]?.next?.token;
        if (next == null) throw new Error(`greedy step ${n}: no token`);
    }

    process.stdout.write(JSON.stringify({n_vocab: vocab, n_tokens: args.tokens.length,
                                         top1, generated}) + "\n");
    await context.dispose();
    await model.dispose();
    await llama.dispose();
}

main().catch((err) => {
    process.stderr.write(`llama-logits: ${err?.message ?? err}\n`);
    process.exit(1);
});
