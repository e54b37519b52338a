// render-template.mjs — renders chat templates with Hugging Face's own
// JavaScript Jinja implementation (@huggingface/jinja), the reference the
// chat-template conformance test compares libmoe against.
//
//   node render-template.mjs TEMPLATE.jinja CONTEXT.json
//       prints the prompt on stdout; "error: <message>" on stderr, exit 1
//   node render-template.mjs --batch MANIFEST.json
//       MANIFEST is [{"template": path, "context": path, "output": path}];
//       writes each prompt to `output`, or "error: <message>" to
//       `output` + ".err"; exit 0 unless the manifest itself is unreadable.
//
// CONTEXT.json is the object of template variables. The clock behind
// strftime_now is pinned to 2024-07-26 12:00 UTC, as in chat-render-tool.
import { Template } from "@huggingface/jinja";
import { readFileSync, writeFileSync } from "node:fs";

const PINNED_MS = 1721995200000;
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    super(...(args.length ? args : [PINNED_MS]));
  }
  static now() {
    return PINNED_MS;
  }
};

function render(templatePath, contextPath) {
  const source = readFileSync(templatePath, "utf8");
  const context = JSON.parse(readFileSync(contextPath, "utf8"));
  return new Template(source).render(context);
}

const args = process.argv.slice(2);
if (args.length === 2 && args[0] === "--batch") {
  const manifest = JSON.parse(readFileSync(args[1], "utf8"));
  for (const job of manifest) {
    try {
      writeFileSync(job.output, render(job.template, job.context));
    } catch (e) {
      writeFileSync(job.output + ".err", "error: " + (e && e.message ? e.message : String(e)));
    }
  }
} else if (args.length === 2) {
  try {
    process.stdout.write(render(args[0], args[1]));
  } catch (e) {
    process.stderr.write("error: " + (e && e.message ? e.message : String(e)) + "\n");
    process.exit(1);
  }
} else {
  process.stderr.write("usage: node render-template.mjs TEMPLATE CONTEXT | --batch MANIFEST\n");
  process.exit(2);
}
