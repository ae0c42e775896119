// What a narrow screen needs (docs/stylesheets/site.css, "Phones"):
// - a display formula or a printed output wider than the column scrolls in
//   its own box; a box that scrolls gets a tab stop, so that a keyboard can
//   scroll it too
//   (WCAG 2.1.1; a11y.js does the same for wide tables);
// - a figure shown smaller than it is drawn (a phone's column is about 350
//   px, a figure 640 px) opens at its full size in a dialog on a tap, a
//   click or Enter, where it scrolls; Escape, the button or a tap closes it.
// Both are decided when the browser lays the element out (a ResizeObserver):
// a chapter lays out a block only when it nears the screen.
(function () {
  "use strict";
  const SCROLLERS =
    "article mjx-container[display='true'], article div.arithmatex, article .jp-RenderedText pre";
  const FIGURES = "article .jp-RenderedImage img[width]";
  const LABEL = document.documentElement.lang === "ja"
    ? { open: "図を原寸で開く", close: "閉じる" }
    : { open: "Open the figure at full size", close: "Close" };

  const shrunk = (img) => img.clientWidth > 0 && img.clientWidth < Number(img.getAttribute("width")) - 1;

  function update(entries) {
    // an element of a block the browser skips has no size yet: reading its
    // scroll width would lay the whole block out now (site.css)
    const laidOut = entries.filter((entry) => entry.contentRect.width > 0);
    const changes = laidOut.map(({ target }) =>
      target.localName === "img"
        ? [target, shrunk(target)]
        : [target, target.scrollWidth > target.clientWidth + 1],
    );
    for (const [element, wide] of changes) {
      if (wide) {
        element.tabIndex = 0;
        if (element.localName === "img") element.title = LABEL.open;
      } else if (element.hasAttribute("tabindex")) {
        element.removeAttribute("tabindex");
        element.removeAttribute("title");
      }
    }
  }

  function open(img) {
    const dialog = document.createElement("dialog");
    dialog.className = "figure-zoom";
    dialog.setAttribute("aria-label", img.alt || LABEL.open);
    const close = document.createElement("button");
    close.type = "button";
    close.textContent = LABEL.close;
    const view = document.createElement("div");
    view.className = "figure-zoom__view";
    const full = img.cloneNode();
    full.removeAttribute("tabindex");
    full.removeAttribute("title");
    full.loading = "eager";
    full.style.width = img.getAttribute("width") + "px";
    view.appendChild(full);
    dialog.append(close, view);
    dialog.addEventListener("click", () => dialog.close());
    dialog.addEventListener("close", () => {
      dialog.remove();
      img.focus({ preventScroll: true });
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    close.focus();
  }

  function start() {
    if (!("ResizeObserver" in window)) return;
    const observer = new ResizeObserver(update);
    document.querySelectorAll(SCROLLERS + ", " + FIGURES).forEach((e) => observer.observe(e));
    document.addEventListener("click", (event) => {
      const img = event.target.closest && event.target.closest(FIGURES);
      if (img && shrunk(img)) open(img);
    });
    document.addEventListener("keydown", (event) => {
      const img = event.target.matches && event.target.matches(FIGURES) ? event.target : null;
      if (img && shrunk(img) && (event.key === "Enter" || event.key === " ")) {
        event.preventDefault();
        open(img);
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
