// Material wraps wide tables in a scrolling box when the page loads; a box
// that scrolls must be reachable with the keyboard (WCAG 2.1.1), so give it
// a tab stop. Material's document$ emits on every page load.
function focusableScrollBoxes() {
  for (const box of document.querySelectorAll(".md-typeset__scrollwrap")) {
    if (box.scrollWidth > box.clientWidth) box.tabIndex = 0;
  }
}
if (typeof document$ !== "undefined") {
  document$.subscribe(focusableScrollBoxes);
} else {
  document.addEventListener("DOMContentLoaded", focusableScrollBoxes);
}
