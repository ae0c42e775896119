// MathJax 3, served by the site itself (assets/vendor/mathjax/, copied from
// the npm package at build time). Two sources of math:
//  - Markdown pages: pymdownx.arithmatex (generic) writes \( \) and \[ \]
//    inside elements of class "arithmatex";
//  - notebook pages: nbconvert leaves the cells' $...$ and $$...$$ as text.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    skipHtmlTags: ["script", "noscript", "style", "textarea", "pre", "code"],
    // mkdocs-jupyter keeps a hidden plain-text copy of each code cell for its
    // copy button: typesetting a "$p$" in there would corrupt the copied code.
    ignoreHtmlClass: "tex2jax_ignore|clipboard-copy-txt",
  },
  svg: { fontCache: "global" },
};
