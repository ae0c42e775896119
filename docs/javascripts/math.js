// Draws the formulas that a page ships undrawn (hooks/typeset_math.js): past
// the first 40, each <mjx-container data-svg="..."> holds an empty <svg> of
// the formula's size and its MathML in a <noscript> (text, with JavaScript
// on); data-svg holds what goes inside the <svg>. Drawing a formula fills
// the <svg> and turns the text into the MathML hidden for screen readers. A
// formula is drawn when the block around it nears the screen (the browser
// stops skipping a content-visibility: auto block, docs/stylesheets/site.css),
// when the browser is idle after the page has loaded (a few at a time, so
// the whole page is drawn shortly after), and all at once before printing.
// Loaded in the head, so that it hears the blocks' first state changes.
// Without JavaScript the <noscript> MathML shows instead (site.css).
(function () {
  document.documentElement.classList.add("math-drawing");
  const UNDRAWN = "mjx-container[data-svg]";

  function draw(container) {
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
  const drawIn = (root) => root.querySelectorAll(UNDRAWN).forEach(draw);

  // The event does not bubble: listen in the capture phase.
  document.addEventListener(
    "contentvisibilityautostatechange",
    (event) => {
      if (!event.skipped) drawIn(event.target);
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
