// A link to a fold ("the note below", hooks/folding.py gives each titled
// fold an id) or to anything inside one opens it, with the folds around it:
// the browser would otherwise scroll to a closed box and show nothing new.
(function () {
  "use strict";
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
    if (opened) target.scrollIntoView();
  }
  addEventListener("hashchange", reveal);
  // a second click on the same link changes no hash, yet its fold may be shut
  document.addEventListener("click", (event) => {
    if (event.target.closest("a[href^='#']")) setTimeout(reveal, 0);
  });
  if (document.readyState === "loading") addEventListener("DOMContentLoaded", reveal);
  else reveal();
})();
