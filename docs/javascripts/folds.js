// A link to a fold ("the note below", hooks/folding.py gives each titled
// fold an id) or to anything inside one opens it, with the folds around it:
// the browser would otherwise scroll to a closed box and show nothing new.
(function () {
  "use strict";
  let stop = null; // cancels the settling scroll of the last reveal

  // Blocks above the target lay out only as they near the screen (site.css,
  // content-visibility), and push it down when they do: scroll to it again
  // until it stays put, unless the reader scrolls first.
  function settle(target) {
    if (stop) stop();
    let tries = 0;
    let timer = null;
    const cancel = () => {
      clearTimeout(timer);
      for (const kind of ["wheel", "touchstart", "keydown"]) removeEventListener(kind, cancel);
      stop = null;
    };
    const again = () => {
      const want = parseFloat(getComputedStyle(target).scrollMarginTop) || 0;
      if (Math.abs(target.getBoundingClientRect().top - want) > 2) target.scrollIntoView();
      if (++tries < 8) timer = setTimeout(again, 120);
      else cancel();
    };
    for (const kind of ["wheel", "touchstart", "keydown"]) addEventListener(kind, cancel);
    stop = cancel;
    target.scrollIntoView();
    timer = setTimeout(again, 60);
  }

  function reveal() {
    const id = decodeURIComponent(location.hash.slice(1));
    const target = id && document.getElementById(id);
    if (!target) return;
    let opened = false;
    for (let node = target; node; node = node.parentElement) {
      if (node.localName === "details" && !node.open) {
        node.open = true;
        opened = true;
      }
    }
    if (opened || target.localName === "details") settle(target);
  }
  addEventListener("hashchange", reveal);
  // a click on a link to the current address changes no hash (no hashchange
  // follows), yet its fold may have been shut since
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a[href^='#']");
    if (link && link.hash === location.hash) setTimeout(reveal, 0);
  });
  if (document.readyState === "loading") addEventListener("DOMContentLoaded", reveal);
  else reveal();
})();
