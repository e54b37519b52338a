// tokenize-ref.mjs — llama.cpp's token ids for test texts, through
// node-llama-cpp (the llama.cpp build its npm package ships), as the
// reference the MoeDesk tokenizer is compared with.
//
//   node tokenize-ref.mjs VOCAB.gguf CASES OUT
//
// CASES is in llama.cpp's .inp format (cases separated by a line
// "__ggml_vocab_test__") and must be valid UTF-8 (JavaScript strings cannot
// carry other bytes). OUT gets, per case and per flag combination, a line
//   "<case> <flags>: id id ..."
// with flags 0 = plain, 1 = add special, 2 = parse special, 3 = both (the
// bits of MOE_TOKENIZE_ADD_SPECIAL / MOE_TOKENIZE_PARSE_SPECIAL).
// node-llama-cpp tokenizes without add_special, so flags 1 and 3 are built
// from llama.cpp's own answers: BOS first if llama_vocab_get_add_bos, EOS
// last if llama_vocab_get_add_eos (that is all add_special changes there).
// The first line is "meta add_bos=<0|1> add_eos=<0|1> bos=<id> eos=<id>";
// then "eog: id ..." (every id llama.cpp says ends generation) and
// "special eot=<id> nl=<id>" (-1 for none).
import {readFileSync, writeFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [vocabPath, casesPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node tokenize-ref.mjs VOCAB.gguf CASES OUT");
  process.exit(2);
}

const SEP = Buffer.from("\n__ggml_vocab_test__\n");

function splitCases(buf) {
  const cases = [];
  let pos = 0;
  while (pos < buf.length) {
    const next = buf.indexOf(SEP, pos);
    if (next < 0) {
      cases.push(buf.subarray(pos));
      break;
    }
    cases.push(buf.subarray(pos, next));
    pos = next + SEP.length;
  }
  return cases;
}

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: vocabPath, vocabOnly: true});
const addBos = model._model.shouldPrependBosToken() && model.tokens.bos != null;
const addEos = model._model.shouldAppendEosToken() && model.tokens.eos != null;
const bos = model.tokens.bos ?? -1;
const eos = model.tokens.eos ?? -1;

const lines = [`meta add_bos=${addBos ? 1 : 0} add_eos=${addEos ? 1 : 0} bos=${bos} eos=${eos}`];
const nTokens = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
const eog = [];
for (let id = 0; id < nTokens; id++)
  if (model.isEogToken(id))
    eog.push(id);
lines.push(`eog: ${eog.join(" ")}`);
lines.push(`special eot=${model.tokens.eot ?? -1} nl=${model.tokens.nl ?? -1}`);
const cases = splitCases(readFileSync(casesPath));
cases.forEach((bytes, i) => {
  const text = bytes.toString("utf8");
  if (!Buffer.from(text, "utf8").equals(bytes)) {
    console.error(`case ${i} is not valid UTF-8`);
    process.exit(2);
  }
  for (const parse of [false, true]) {
    const ids = text === "" ? [] : Array.from(model._model.tokenize(text, parse));
    const withSpecial = [...(addBos ? [bos] : []), ...ids, ...(addEos ? [eos] : [])];
    lines.push(`${i} ${parse ? 2 : 0}: ${ids.join(" ")}`);
    lines.push(`${i} ${parse ? 3 : 1}: ${withSpecial.join(" ")}`);
  }
});
writeFileSync(outPath, lines.join("\n") + "\n");
await model.dispose();
await llama.dispose();
