// service-clients.mjs — the official OpenAI and Anthropic npm clients against
// a real moedesk-service (demo model, random weights) on loopback, used the
// way editor plugins use them: chat completions streamed and not, text
// completions (with a suffix on a model that has FIM tokens), the model
// list, Anthropic messages streamed and not, and errors the clients turn
// into their own exception types.
//
// usage: node service-clients.mjs MOEDESK_SERVICE DEMO_MODEL.gguf [FIM_MODEL.gguf]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import readline from 'node:readline';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [exe, model, fimModel] = process.argv.slice(2);
let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else { failed++; console.log('FAIL:', what); }
}

async function startService(modelPath) {
  const home = mkdtempSync(join(tmpdir(), 'moedesk-node-'));
  const env = { ...process.env, HOME: home, XDG_DATA_HOME: join(home, 'data'),
                XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache'),
                MOEDESK_DATA_DIR: join(home, 'data', 'moedesk') };
  const proc = spawn(exe, ['--port', '0', '--no-tray', '--model', modelPath], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', d => { stderr += d; });
  const rl = readline.createInterface({ input: proc.stdout });
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('service did not start: ' + stderr)), 60000);
    rl.on('line', line => {
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(line);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', code => reject(new Error(`service exited ${code}: ${stderr}`)));
  });
  return {
    port, base: `http://127.0.0.1:${port}`,
    async stop() {
      const code = await new Promise(resolve => { proc.on('exit', resolve); proc.kill('SIGTERM'); });
      rmSync(home, { recursive: true, force: true });
      return code;
    },
  };
}

const NAME = 'moedesk-demo-random';
const svc = await startService(model);
try {
  const openai = new OpenAI({ baseURL: svc.base + '/v1', apiKey: 'sk-no-key-required', maxRetries: 0 });

  const list = await openai.models.list();
  const ids = [];
  for await (const m of list) ids.push(m.id);
  check(ids.includes(NAME), `models.list has the demo model (${ids})`);

  const r = await openai.chat.completions.create({
    model: NAME, messages: [{ role: 'user', content: 'Hello from the openai client' }],
    max_tokens: 8, temperature: 0 });
  check(r.object === 'chat.completion', 'chat object');
  check(typeof r.choices[0].message.content === 'string', 'chat content');
  check(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 8, 'chat usage');

  const stream = await openai.chat.completions.create({
    model: NAME, messages: [{ role: 'user', content: 'Hello from the openai client' }],
    max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = '', usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.choices.length) {
      text += chunk.choices[0].delta.content ?? '';
      if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  check(text === r.choices[0].message.content, 'streamed text equals the non-streamed (greedy)');
  check(finish === r.choices[0].finish_reason, 'stream finish_reason');
  check(usage && usage.completion_tokens === r.usage.completion_tokens, 'stream usage');
  check(usage && usage.prompt_tokens_details.cached_tokens > 0, 'repeat served from the cache');

  const c = await openai.completions.create({ model: NAME, prompt: 'Once upon', max_tokens: 5, temperature: 0 });
  check(c.object === 'text_completion' && typeof c.choices[0].text === 'string', 'completions');

  try {
    await openai.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] });
    check(false, 'unknown model must fail');
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError, `unknown model is a NotFoundError (${e.constructor.name})`);
    check(e.code === 'model_not_found', `error code (${e.code})`);
  }
  try {
    await openai.chat.completions.create({ model: NAME, messages: [{ role: 'user', content: 'x' }], temperature: 7 });
    check(false, 'temperature 7 must fail');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `bad temperature is a BadRequestError (${e.constructor.name})`);
    check(e.param === 'temperature', `error param (${e.param})`);
  }

  const anthropic = new Anthropic({ baseURL: svc.base, apiKey: 'not-needed', maxRetries: 0 });
  const m = await anthropic.messages.create({
    model: NAME, max_tokens: 8, system: 'Be brief.',
    messages: [{ role: 'user', content: 'Hello from the Anthropic client' }] });
  check(m.type === 'message' && m.content[0].type === 'text', 'anthropic message');
  check(['end_turn', 'max_tokens', 'stop_sequence'].includes(m.stop_reason), `stop_reason ${m.stop_reason}`);
  const ms = anthropic.messages.stream({
    model: NAME, max_tokens: 8, temperature: 0,
    messages: [{ role: 'user', content: 'Hello from the Anthropic client' }] });
  let atext = '';
  ms.on('text', t => { atext += t; });
  const final = await ms.finalMessage();
  check(final.content.length >= 1 && final.content[0].text === atext, 'anthropic stream text');
  check(final.usage.output_tokens > 0, 'anthropic stream usage');
} catch (e) {
  check(false, 'unexpected exception: ' + (e.stack || e));
} finally {
  const code = await svc.stop();
  check(code === 0, `service exit code ${code}`);
}

if (fimModel) {
  const fsvc = await startService(fimModel);
  try {
    const openai = new OpenAI({ baseURL: fsvc.base + '/v1', apiKey: 'x', maxRetries: 0 });
    const models = [];
    for await (const m of await openai.models.list()) models.push(m.id);
    const c = await openai.completions.create({ model: models[0], prompt: 'def add(a, b):\n    ',
      suffix: '\n    return c\n', max_tokens: 6, temperature: 0 });
    check(typeof c.choices[0].text === 'string' && c.usage.prompt_tokens > 0, 'completions with suffix (FIM)');
  } catch (e) {
    check(false, 'FIM: unexpected exception: ' + (e.stack || e));
  } finally {
    await fsvc.stop();
  }
}

console.log(`${passed} checks passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
