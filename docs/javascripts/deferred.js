// Draws what a page ships undrawn, so that the browser makes fewer elements
// while it reads the page (issue 17):
// - formulas (hooks/typeset_math.js): past the first 40, each
//   <mjx-container data-svg="..."> holds an empty <svg> of the formula's
//   size and its MathML in a <noscript> (text, with JavaScript on); drawing
//   fills the <svg> from data-svg and turns the text into the MathML hidden
//   for screen readers;
// - code colouring (hooks/notebooks.py): past the first code cells, a
//   <pre data-html="..."> holds its code as plain text; drawing puts the
//   coloured markup of data-html in its place.
// Both sit in blocks the browser skips until they near the screen
// (content-visibility: auto, docs/stylesheets/site.css). A block is drawn
// when it nears the screen, when a folded solution opens, when the browser
// is idle after the page has loaded (a few at a time, so the whole page is
// drawn shortly after), and all at once before printing. Loaded in the
// head, so that it hears the blocks' first state changes. Without
// JavaScript the formulas show their MathML and the code its plain text.
(function () {
  document.documentElement.classList.add("math-drawing");
  const UNDRAWN = "mjx-container[data-svg], pre[data-html]";

  function drawFormula(container) {
    const svg = container.firstElementChild;
    if (svg instanceof SVGSVGElement) svg.innerHTML = container.getAttribute("data-svg");
    const text = container.lastElementChild;
    if (text && text.localName === "noscript") {
      const mathml = document.createElement("mjx-assistive-mml");
      mathml.setAttribute("unselectable", "on");
      mathml.innerHTML = text.textContent;
      const block = mathml.firstElementChild?.getAttribute("display") === "block";
      mathml.setAttribute("display", block ? "block" : "inline");
      text.replaceWith(mathml);
    }
    container.removeAttribute("data-svg");
  }
  function draw(element) {
    if (element.localName === "pre") {
      element.innerHTML = element.getAttribute("data-html");
      element.removeAttribute("data-html");
    } else {
      drawFormula(element);
    }
  }
  const drawIn = (root) => root.querySelectorAll(UNDRAWN).forEach(draw);

  // Neither event bubbles: listen in the capture phase.
  document.addEventListener(
    "contentvisibilityautostatechange",
    (event) => {
      if (!event.skipped) drawIn(event.target);
    },
    { capture: true },
  );
  document.addEventListener(
    "toggle",
    (event) => {
      if (event.target.open) drawIn(event.target);
    },
    { capture: true },
  );
  addEventListener("beforeprint", () => drawIn(document));

  // At most a second's wait for idle time; Safari has no requestIdleCallback:
  // 10 ms slices there.
  const idle = window.requestIdleCallback
    ? (run) => requestIdleCallback(run, { timeout: 1000 })
    : (run) =>
        setTimeout(() => {
          const end = performance.now() + 10;
          run({ timeRemaining: () => end - performance.now() });
        }, 1);
  function drawWhileIdle(deadline) {
    const left = document.querySelectorAll(UNDRAWN);
    let i = 0;
    while (i < left.length && deadline.timeRemaining() > 1) draw(left[i++]);
    if (i < left.length) idle(drawWhileIdle);
  }
  addEventListener("load", () => idle(drawWhileIdle));
})();
