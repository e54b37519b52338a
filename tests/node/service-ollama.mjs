// service-ollama.mjs — the official `ollama` npm client (what Continue, Zed
// and many scripts use) against a real moedesk-service: list, show
// (capabilities, model_info context length, a template with .Suffix for a
// FIM model), ps, chat streamed and whole, generate with `suffix` (fill in
// the middle), an options.num_ctx overflow answered with an error, and the
// embedding endpoint refused. The service runs in a throw-away home on a
// free loopback port (--port 0; the port is read from its first stdout
// line) and must exit 0 on SIGTERM.
//
// usage: node service-ollama.mjs MOEDESK_SERVICE FIM_MODEL.gguf
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { Ollama } from 'ollama';

const [exe, modelPath] = process.argv.slice(2);
if (!exe || !modelPath) {
  console.error('usage: node service-ollama.mjs MOEDESK_SERVICE FIM_MODEL.gguf');
  process.exit(2);
}
const modelName = basename(modelPath).replace(/\.gguf$/, '');

let passed = 0;
let failed = 0;
function check(cond, what) {
  if (cond) {
    passed++;
  } else {
    failed++;
    console.log('FAIL:', what);
  }
}
function eq(got, want, what) {
  check(JSON.stringify(got) === JSON.stringify(want),
    `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

function startService() {
  const home = mkdtempSync(join(tmpdir(), 'moedesk-ollama-'));
  const env = {
    ...process.env,
    HOME: home,
    XDG_DATA_HOME: join(home, 'data'),
    XDG_CONFIG_HOME: join(home, 'config'),
    XDG_CACHE_HOME: join(home, 'cache'),
    MOEDESK_DATA_DIR: join(home, 'data', 'moedesk'),
    G_DEBUG: 'fatal-criticals',
  };
  const proc = spawn(exe, ['--port', '0', '--no-tray', '--model', modelPath], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no listening line in 60 s\n' + stderr)), 60000);
    const lines = createInterface({ input: proc.stdout });
    lines.once('line', (line) => {
      clearTimeout(timer);
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(line);
      if (!m) reject(new Error(`unexpected first line ${line}\n${stderr}`));
      else resolve({ proc, port: Number(m[1]), home, stderr: () => stderr });
    });
    proc.once('exit', (code) => reject(new Error(`moedesk-service exited ${code}\n${stderr}`)));
  });
}

function stopService(svc) {
  return new Promise((resolve) => {
    svc.proc.removeAllListeners('exit');
    svc.proc.once('exit', (code, sig) => resolve(code ?? sig));
    svc.proc.kill('SIGTERM');
  });
}

async function expectError(promise, status, what) {
  try {
    await promise;
    check(false, `${what}: expected an error`);
    return null;
  } catch (e) {
    check(e.name === 'ResponseError', `${what}: ResponseError, got ${e.name}: ${e.message}`);
    eq(e.status_code, status, `${what}: status`);
    return e;
  }
}

const svc = await startService();
try {
  const ollama = new Ollama({ host: `http://127.0.0.1:${svc.port}` });
  const tagged = `${modelName}:latest`;

  // list: the model as "NAME:latest" with GGUF details.
  const list = await ollama.list();
  const entry = list.models.find((m) => m.name === tagged);
  check(entry, `list has ${tagged}: ${JSON.stringify(list.models.map((m) => m.name))}`);
  if (entry) {
    eq(entry.model, tagged, 'list model');
    eq(entry.details.format, 'gguf', 'list details.format');
    eq(entry.details.family, 'qwen3moe', 'list details.family');
    check(entry.size > 0, 'list size');
    check(/^[0-9a-f]{64}$/.test(entry.digest), 'list digest');
    check(!Number.isNaN(Date.parse(entry.modified_at)), 'list modified_at is a time');
  }

  // show: what plugins read to size prompts and to decide on FIM.
  const show = await ollama.show({ model: tagged });
  check(show.capabilities.includes('completion'), 'capabilities has completion');
  check(show.capabilities.includes('insert'), 'capabilities has insert (FIM tokens)');
  check(!show.capabilities.includes('tools'), 'no tools for a template without them');
  check(show.template.includes('.Suffix'), 'template mentions .Suffix');
  check(show.template.includes('<|fim_prefix|>'), 'template shows the FIM prefix token');
  const ctx = show.model_info['qwen3moe.context_length'];
  check(Number.isInteger(ctx) && ctx > 0, `model_info context length ${ctx}`);
  eq(show.model_info['general.architecture'], 'qwen3moe', 'model_info architecture');
  check(show.model_info['general.parameter_count'] > 0, 'model_info parameter count');
  check(Array.isArray(show.model_info['tokenizer.ggml.tokens']) &&
        show.model_info['tokenizer.ggml.tokens'].length === 0, 'vocabulary hidden unless verbose');
  check(/num_ctx\s+\d+/.test(show.parameters), `parameters has num_ctx: ${show.parameters}`);
  eq(show.details.quantization_level, 'F32', 'show quantization level');
  await expectError(ollama.show({ model: 'no-such-model' }), 404, 'show unknown model');

  // chat, streamed: NDJSON chunks then the final counts.
  const messages = [{ role: 'user', content: 'Say something.' }];
  const options = { temperature: 0, num_predict: 8, seed: 3 };
  let streamed = '';
  let last = null;
  let chunks = 0;
  for await (const part of await ollama.chat({ model: tagged, messages, options, stream: true })) {
    chunks++;
    eq(part.message.role, 'assistant', 'chunk role');
    streamed += part.message.content;
    last = part;
  }
  check(chunks >= 2, `several chunks (${chunks})`);
  check(last && last.done === true, 'last chunk done');
  if (last) {
    check(['stop', 'length'].includes(last.done_reason), `done_reason ${last.done_reason}`);
    check(last.eval_count >= 1 && last.eval_count <= 8, `eval_count ${last.eval_count}`);
    check(last.prompt_eval_count > 3, `prompt_eval_count ${last.prompt_eval_count}`);
    check(last.total_duration > 0 && last.prompt_eval_duration >= 0 && last.eval_duration >= 0,
      'durations in nanoseconds');
    check(last.total_duration >= last.prompt_eval_duration + last.eval_duration,
      'total covers prompt and generation');
  }

  // chat, whole: the same greedy text.
  const whole = await ollama.chat({ model: tagged, messages, options, stream: false });
  eq(whole.done, true, 'whole chat done');
  eq(whole.message.role, 'assistant', 'whole chat role');
  eq(whole.message.content, streamed, 'whole chat text = streamed text');
  eq(whole.eval_count, last && last.eval_count, 'same eval_count');

  // generate with suffix: fill in the middle through the FIM tokens.
  const fimReq = { model: tagged, prompt: 'def add(a, b):\n    ', suffix: '\n    return c\n', options };
  const fim = await ollama.generate({ ...fimReq, stream: false });
  eq(fim.done, true, 'generate with suffix done');
  check(typeof fim.response === 'string', 'generate response');
  check(fim.eval_count >= 1 && fim.eval_count <= 8, `generate eval_count ${fim.eval_count}`);
  let fimStreamed = '';
  for await (const part of await ollama.generate({ ...fimReq, stream: true })) fimStreamed += part.response;
  eq(fimStreamed, fim.response, 'streamed suffix generate = whole');
  // The model's vocabulary is byte-level: a raw prompt is one token per
  // byte (plus BOS if the vocabulary adds one), a FIM prompt three more.
  const raw = await ollama.generate({ model: tagged, prompt: 'abc', raw: true, options, stream: false });
  const bos = raw.prompt_eval_count - 3;
  check(bos === 0 || bos === 1, `raw prompt tokenized as is (${raw.prompt_eval_count} tokens)`);
  eq(fim.prompt_eval_count,
    bos + 3 + Buffer.byteLength(fimReq.prompt) + Buffer.byteLength(fimReq.suffix),
    'FIM prompt = prefix + suffix + 3 FIM tokens');

  // options.num_ctx: a prompt that does not fit is an error, not truncated.
  const long = 'word '.repeat(40);
  const e1 = await expectError(ollama.chat({ model: tagged, messages: [{ role: 'user', content: long }],
    options: { num_ctx: 32 }, stream: false }), 400, 'num_ctx overflow');
  check(e1 && /num_ctx/.test(e1.error), `error names num_ctx: ${e1 && e1.error}`);
  await expectError(ollama.chat({ model: tagged, messages: [{ role: 'user', content: long }],
    options: { num_ctx: 32 }, stream: true }), 400, 'num_ctx overflow, streamed');
  // A num_ctx that fits caps the answer instead.
  const capped = await ollama.generate({ model: tagged, prompt: 'abcdefghij', raw: true,
    options: { num_ctx: 14, temperature: 0 }, stream: false });
  check(capped.prompt_eval_count + capped.eval_count <= 14, 'answer fits in num_ctx');

  // ps: the loaded model, on the CPU.
  const ps = await ollama.ps();
  eq(ps.models.map((m) => m.name), [tagged], 'ps lists the loaded model');
  if (ps.models[0]) {
    eq(ps.models[0].size_vram, 0, 'size_vram 0');
    check(ps.models[0].size > 0, 'ps size');
  }

  // Not offered: embeddings.
  await expectError(ollama.embed({ model: tagged, input: 'x' }), 501, 'embed');
} catch (e) {
  check(false, `unexpected exception: ${e.stack || e}`);
} finally {
  const rc = await stopService(svc);
  eq(rc, 0, 'service exits 0 on SIGTERM');
  if (failed) console.log(svc.stderr());
  rmSync(svc.home, { recursive: true, force: true });
}
console.log(`${passed} checks passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
