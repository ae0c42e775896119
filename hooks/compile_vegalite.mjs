// Compiles the explorables' Vega-Lite specs to Vega specs at build time
// (hooks/explorables.py runs it once per build, never once per page), so a
// page loads only Vega's runtime (vega.min.js), not the Vega-Lite compiler.
//
//   node hooks/compile_vegalite.mjs < specs.json > compiled.json
//
// Reads {"key": vega-lite spec, ...} on stdin and prints {"key": vega spec,
// ...}. A spec that does not compile stops the script with its key and the
// compiler's message (the build fails on it); so does a compiler warning,
// which usually means a field or a parameter name is wrong.
import { compile } from "vega-lite";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const specs = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const out = {};
for (const [key, spec] of Object.entries(specs)) {
  const warnings = [];
  const logger = {
    level: () => logger,
    warn: (...args) => warnings.push(args.join(" ")),
    info: () => logger,
    debug: () => logger,
    error: (...args) => warnings.push(args.join(" ")),
  };
  try {
    out[key] = compile(spec, { logger }).spec;
  } catch (error) {
    process.stderr.write(`${key}: ${error.message}\n`);
    process.exit(1);
  }
  if (warnings.length) {
    process.stderr.write(`${key}: ${warnings.join("; ")}\n`);
    process.exit(1);
  }
}
process.stdout.write(JSON.stringify(out));
