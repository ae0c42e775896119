// The light/dark toggle of docs/overrides/partials/palette.html. Loaded right
// after the toggle's form, before the chapter is parsed, so that choosing the
// scheme restyles only the header: the saved choice, or on a first visit the
// scheme that matches the system's preference (Material's own header script,
// which runs just after, applies the same saved choice again), the toggle's
// labels, the theme-color meta tag and the reader's clicks. Material's own
// component is not used: it restyles the whole chapter on every load (issue
// 17). Material's automatic "(prefers-color-scheme)" option is not handled:
// mkdocs.yml does not use it.
(function () {
  const form = document.querySelector("form[data-palette]");
  if (!form) return;
  const inputs = [...form.querySelectorAll("input[name=__palette]")];
  const body = document.body;
  const meta = (name) => {
    let tag = document.head.querySelector(`meta[name="${name}"]`);
    if (!tag) {
      tag = document.createElement("meta");
      tag.name = name;
      document.head.appendChild(tag);
    }
    return tag;
  };
  const colours = (input) => ({
    media: input.getAttribute("data-md-color-media"),
    scheme: input.getAttribute("data-md-color-scheme"),
    primary: input.getAttribute("data-md-color-primary"),
    accent: input.getAttribute("data-md-color-accent"),
  });

  // Shows the choice `index`: checks its input, shows the label that leads to
  // the next one, sets <body>'s attributes where they differ, remembers it.
  function show(index) {
    const input = inputs[index];
    input.checked = true;
    inputs.forEach((other, i) => {
      const label = other.nextElementSibling;
      if (label instanceof HTMLLabelElement) label.hidden = i !== index;
    });
    const color = colours(input);
    for (const [key, value] of Object.entries(color)) {
      if (body.getAttribute(`data-md-color-${key}`) !== value) {
        body.setAttribute(`data-md-color-${key}`, value);
      }
    }
    __md_set("__palette", { index, color });
    // Only the header is styled this early, so reading its colour is cheap.
    const header = getComputedStyle(document.querySelector("header"));
    meta("color-scheme").content = header.colorScheme;
    meta("theme-color").content =
      "#" +
      header.backgroundColor
        .match(/\d+/g)
        .slice(0, 3)
        .map((c) => (+c).toString(16).padStart(2, "0"))
        .join("");
  }

  const saved = __md_get("__palette");
  const preferred = inputs.findIndex((input) =>
    matchMedia(input.getAttribute("data-md-color-media")).matches,
  );
  const first = saved && Number.isInteger(saved.index) ? saved.index : preferred;
  show(Math.max(0, Math.min(first, inputs.length - 1)));

  // A change of scheme: transitions off while the colours change (Material's
  // CSS reads data-md-color-switching), back on at the next frame.
  form.addEventListener("change", (event) => {
    const index = inputs.indexOf(event.target);
    if (index < 0) return;
    body.setAttribute("data-md-color-switching", "");
    show(index);
    requestAnimationFrame(() => body.removeAttribute("data-md-color-switching"));
  });
  // Enter on the focused option moves to the next one, as in Material.
  form.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    const next = inputs[(inputs.findIndex((input) => input.checked) + 1) % inputs.length];
    event.preventDefault();
    next.click();
    next.focus();
  });
})();
