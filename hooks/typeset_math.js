// Typesets the math of built HTML pages, in place, once, at build time
// (hooks/math.py runs it once per build over every page that has math):
// MathJax 3 in node with its lightweight DOM, TeX in, SVG out, with the
// hidden MathML that screen readers read. A page then shows its formulas at
// first paint and loads no MathJax.
//
//   node hooks/typeset_math.js PAGE.html...
//
// Prints one JSON line per page: {"page", "formulas", "errors": [...]}.
// The delimiters and skipped elements are those the site's browser MathJax
// used: $...$ and \(...\) inline, $$...$$ and \[...\] display, \$ a dollar;
// nothing inside pre, code, script, style or textarea is touched.
"use strict";

const fs = require("fs");
const { mathjax } = require("mathjax-full/js/mathjax.js");
const { TeX } = require("mathjax-full/js/input/tex.js");
const { SVG } = require("mathjax-full/js/output/svg.js");
const { liteAdaptor } = require("mathjax-full/js/adaptors/liteAdaptor.js");
const { RegisterHTMLHandler } = require("mathjax-full/js/handlers/html.js");
const { AssistiveMmlHandler } = require("mathjax-full/js/a11y/assistive-mml.js");
const { AllPackages } = require("mathjax-full/js/input/tex/AllPackages.js");

const adaptor = liteAdaptor();
AssistiveMmlHandler(RegisterHTMLHandler(adaptor));

// noerrors would hide a TeX error as its source text, noundefined an unknown
// macro as red text: without them both are errors, reported (and failing
// the build).
const PACKAGES = AllPackages.filter((name) => !["noerrors", "noundefined"].includes(name));
const MARK = "math-typeset-at-build";

// Only the page's <article> is typeset (the math is there; the rest of the
// page is navigation), and MathJax's style sheet goes into the page's head.
function typeset(file) {
  const page = fs.readFileSync(file, "utf8");
  const start = page.indexOf("<article");
  const end = page.lastIndexOf("</article>") + "</article>".length;
  if (start < 0 || end < start || page.includes(MARK)) {
    return { page: file, formulas: 0, errors: [] };
  }
  const doc = mathjax.document(`<html><head></head><body>${page.slice(start, end)}</body></html>`, {
    InputJax: new TeX({
      packages: PACKAGES,
      inlineMath: [["$", "$"], ["\\(", "\\)"]],
      displayMath: [["$$", "$$"], ["\\[", "\\]"]],
      processEscapes: true,
      processEnvironments: true,
    }),
    // "global": each glyph's path is stored once per page and reused
    OutputJax: new SVG({ fontCache: "global" }),
    skipHtmlTags: ["script", "noscript", "style", "textarea", "pre", "code"],
    ignoreHtmlClass: "tex2jax_ignore|clipboard-copy-txt",
  });
  doc.render();
  const errors = [];
  let formulas = 0;
  let items = 0;
  for (const item of doc.math) {
    items += 1;
    if (item.start.delim === "" && item.math === "$") continue; // an escaped \$
    formulas += 1;
    let failed = false;
    item.root.walkTree((node) => {
      if (node.isKind("merror")) failed = true;
    });
    if (failed) errors.push(item.math);
  }
  if (items > 0) {
    const body = adaptor.innerHTML(adaptor.body(doc.document));
    const style = adaptor.innerHTML(adaptor.head(doc.document));
    const head = page.indexOf("</head>");
    fs.writeFileSync(
      file,
      page.slice(0, head) +
        `<meta name="${MARK}">` +
        style +
        page.slice(head, start) +
        body +
        page.slice(end),
    );
  }
  return { page: file, formulas, errors };
}

for (const file of process.argv.slice(2)) {
  process.stdout.write(JSON.stringify(typeset(file)) + "\n");
}
