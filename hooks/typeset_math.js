// Typesets the math of built HTML pages, in place, once, at build time
// (hooks/math.py runs it once per build over every page that has math):
// MathJax 3 in node with its lightweight DOM, TeX in, SVG out, with the
// hidden MathML that screen readers read. A page then shows its formulas at
// first paint and loads no MathJax.
//
//   node hooks/typeset_math.js [--drawn=N] PAGE.html...
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
// MathJax's serializer escapes only the double quote of an attribute's
// value, so a value that holds an escaped character (a code block's
// colouring in data-html, hooks/code_blocks.py: "&lt;" inside) would be read
// back by the browser unescaped ("<", the start of a tag). The ampersand too:
adaptor.parser.protectAttribute = (text) =>
  String(text).replace(/&/g, "&amp;").replace(/"/g, "&quot;");

// noerrors would hide a TeX error as its source text, noundefined an unknown
// macro as red text: without them both are errors, reported (and failing
// the build).
const PACKAGES = AllPackages.filter((name) => !["noerrors", "noundefined"].includes(name));
const MARK = "math-typeset-at-build";

// MathJax's SVG carries attributes for its in-browser tools (the menu, the
// expression explorer), which the site does not load, and wraps every node
// of the formula in a <g>, most of which then has no attribute at all.
// Dropping them makes a chapter's HTML about a quarter smaller and its DOM
// about a tenth smaller (issue 17: parsing and styling it is what a later
// chapter's load time is made of); the drawing is the same. Kept: the node
// kinds MathJax's stylesheet selects on (tables, errors, actions).
const STYLED_NODES = new Set(["mtable", "merror", "maction"]);
const TOOL_ATTRIBUTES = ["data-c", "data-mjx-texclass"];

function slim(node) {
  for (const child of [...adaptor.childNodes(node)]) {
    if (adaptor.kind(child) !== "#text") slim(child);
  }
  const kind = adaptor.kind(node);
  if (kind === "svg" || kind === "math") {
    // the HTML parser puts <svg> and <math> in their namespaces by itself
    adaptor.removeAttribute(node, "xmlns");
    adaptor.removeAttribute(node, "xmlns:xlink");
  }
  for (const name of TOOL_ATTRIBUTES) adaptor.removeAttribute(node, name);
  if (!STYLED_NODES.has(adaptor.getAttribute(node, "data-mml-node"))) {
    adaptor.removeAttribute(node, "data-mml-node");
  }
  const href = adaptor.getAttribute(node, "xlink:href");
  if (href) {
    adaptor.removeAttribute(node, "xlink:href");
    adaptor.setAttribute(node, "href", href); // SVG 2: every current browser
  }
  if (kind === "g" && adaptor.allAttributes(node).length === 0) {
    for (const child of [...adaptor.childNodes(node)]) adaptor.insert(child, node);
    adaptor.remove(node);
  }
}
// MathJax's rule for glyph outlines selects on data-c; the same for every
// glyph of a formula without it.
const GLYPH_RULE = 'mjx-container[jax="SVG"] use { stroke-width: 3; }\n';

// A chapter holds up to about 340 formulas, and making the elements of their
// drawings is the larger part of what a browser does to show a chapter
// (issue 17), while a reader sees one screen: at most 40 formulas on every
// page and screen measured (1280 x 1600 px). So the first DRAWN formulas
// are drawn in the HTML, and each later one that sits in a block the page
// skips until it nears the screen (inSkippedBlock) ships an empty <svg> of
// its size (the page's layout is final at once) with its drawing in the
// container's data-svg attribute, and its MathML inside <noscript>: with
// JavaScript on, the browser reads that as one run of text instead of
// making an element of every symbol (the hidden MathML is a third of a
// chapter's elements); without JavaScript, the MathML is what shows.
// The page's script (docs/overrides/partials/deferred.html) puts both in
// place (the drawing, and the MathML hidden for screen readers) when the
// block nears the screen, when the browser is idle after loading, or before
// printing.
const DRAWN = 40;
const NONCE = require("crypto").randomBytes(8).toString("hex");

// Whether `node` sits in a block that docs/stylesheets/site.css skips until
// it nears the screen: a code cell or folded solution of a notebook, or a
// block of a Markdown cell other than a heading or a table (Material moves a
// table into a scrolling box that is not skipped). Elsewhere (a heading,
// a page that is not a notebook) no state change would ever say when the
// formula comes near, so it is drawn in the HTML.
function inSkippedBlock(node) {
  for (let child = node, parent = adaptor.parent(node); parent; ) {
    if (adaptor.hasClass(parent, "jp-MarkdownOutput")) {
      return !/^(h[1-6]|table)$/.test(adaptor.kind(child));
    }
    if (adaptor.hasClass(parent, "jp-Notebook")) {
      return adaptor.kind(child) === "details" || adaptor.hasClass(child, "jp-CodeCell");
    }
    child = parent;
    parent = adaptor.parent(parent);
  }
  return false;
}

function undraw(container, drawings) {
  const [svg, mml] = adaptor.childNodes(container);
  drawings.push(adaptor.innerHTML(svg));
  for (const child of adaptor.childNodes(svg)) adaptor.remove(child);
  adaptor.setAttribute(container, "data-svg", `${NONCE}:${drawings.length - 1}`);
  // <math display="block"> still says how the page should hide it again
  adaptor.replace(adaptor.node("noscript", {}, [adaptor.firstChild(mml)]), mml);
}

// The serializer writes attributes in double quotes and would turn every
// quote of the drawing into &quot;: single quotes instead, with & and '
// escaped, so the attribute reads back as the drawing.
function withDrawings(html, drawings) {
  let placed = 0;
  const out = html.replace(new RegExp(` data-svg="${NONCE}:(\\d+)"`, "g"), (_, i) => {
    placed += 1;
    const text = drawings[Number(i)].replace(/&/g, "&amp;").replace(/'/g, "&#39;");
    return ` data-svg='${text}'`;
  });
  if (placed !== drawings.length) {
    throw new Error(`placed ${placed} of ${drawings.length} undrawn formulas' drawings`);
  }
  return out;
}

// Only the page's <article> is typeset (the math is there; the rest of the
// page is navigation), and MathJax's style sheet goes into the page's head.
function typeset(file, drawn) {
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
  const drawings = [];
  let formulas = 0;
  let items = 0;
  for (const item of doc.math) {
    items += 1;
    if (item.start.delim === "" && item.math === "$") continue; // an escaped \$
    let failed = false;
    item.root.walkTree((node) => {
      if (node.isKind("merror")) failed = true;
    });
    if (failed) errors.push(item.math);
    slim(item.typesetRoot);
    if (formulas++ >= drawn && inSkippedBlock(item.typesetRoot)) {
      undraw(item.typesetRoot, drawings);
    }
  }
  if (items > 0) {
    const body = withDrawings(adaptor.innerHTML(adaptor.body(doc.document)), drawings);
    const style = adaptor
      .innerHTML(adaptor.head(doc.document))
      .replace("</style>", GLYPH_RULE + "</style>");
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

const args = process.argv.slice(2);
const option = args.find((arg) => arg.startsWith("--drawn="));
const drawn = option ? Number(option.slice("--drawn=".length)) : DRAWN;
for (const file of args.filter((arg) => arg !== option)) {
  process.stdout.write(JSON.stringify(typeset(file, drawn)) + "\n");
}
