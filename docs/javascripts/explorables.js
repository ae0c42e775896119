// Interactive figures (hooks/explorables.py): only the pages that show one
// load this script. When a figure comes near the screen, it loads Vega's
// runtime (once per page, from this site) and the figure's compiled spec,
// and draws it (SVG, or canvas where the figure asks for it) with its
// sliders and selectors. Text and axes take the page's text colour, again
// whenever the reader switches between the light and the dark scheme. The
// view is kept on the element (figure.vegaView), where the browser tests
// read the plotted values; data-state="ready" marks a drawn figure.
(function () {
  "use strict";
  const script = document.currentScript;
  const figures = document.querySelectorAll("figure.explorable[data-spec]");
  if (!figures.length || !script) return;
  let vegaLoaded = null;
  const views = [];

  // Material switches the scheme on <body data-md-color-scheme>.
  new MutationObserver(function () {
    for (const [figure, view] of views) {
      view.signal("textColor", getComputedStyle(figure).color).runAsync();
    }
  }).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });

  // Sums that a spec's expressions cannot loop over, for the specs to call
  // (registered with Vega before a spec is parsed). Both follow posenc; the
  // browser tests compare what they plot with posenc.
  const FUNCTIONS = {
    // Chapter 01: PE(p) . PE(p + k) = sum_{i < n} cos(k base^(-i/n)), the
    // dot product of posenc.sinusoidal's codes (n = dim // 2 frequencies).
    sinusoidDot: function (k, base, n) {
      let sum = 0;
      for (let i = 0; i < n; i++) sum += Math.cos(k * Math.pow(base, -i / n));
      return sum;
    },
    // Chapter 08: RoFormer's relative upper bound at distance r,
    // (1 / (d/2)) sum_{j=1}^{d/2} |S_j|, S_j = sum_{l < j} e^{i r theta_l},
    // theta_l = base^(-2l / d) (posenc.rope_frequencies, here in float64).
    ropeBound: function (r, base, dim) {
      const n = Math.floor(dim / 2);
      let re = 0, im = 0, total = 0;
      for (let l = 0; l < n; l++) {
        const phase = r * Math.pow(base, (-2 * l) / dim);
        re += Math.cos(phase);
        im += Math.sin(phase);
        total += Math.hypot(re, im);
      }
      return total / n;
    },
  };

  function loadVega() {
    if (!vegaLoaded) {
      vegaLoaded = new Promise(function (resolve, reject) {
        const tag = document.createElement("script");
        tag.src = script.dataset.vega;
        tag.onload = function () {
          for (const name in FUNCTIONS) vega.expressionFunction(name, FUNCTIONS[name]);
          resolve();
        };
        tag.onerror = function () { reject(new Error("could not load " + tag.src)); };
        document.head.appendChild(tag);
      });
    }
    return vegaLoaded;
  }

  async function draw(figure) {
    figure.dataset.state = "loading";
    const [, response] = await Promise.all([loadVega(), fetch(figure.dataset.spec)]);
    if (!response.ok) throw new Error("could not load " + figure.dataset.spec);
    const spec = await response.json();
    const container = figure.querySelector(".explorable-view");
    let view = await render(figure, container, spec);
    // Charts side by side (Vega-Lite's hconcat) that are wider than the
    // column are stacked, one under the other, their legends under them,
    // rather than shrunk until their labels cannot be read (a phone's
    // column is about 350 px).
    const marks = container.querySelector(".marks");
    if (spec.layout && !spec.layout.columns && marks && marks.getBoundingClientRect().width > container.clientWidth) {
      view.finalize();
      container.replaceChildren();
      const legends = (spec.legends || []).map((legend) => ({ ...legend, orient: "bottom", direction: "horizontal" }));
      view = await render(figure, container, { ...spec, layout: { ...spec.layout, columns: 1 }, legends });
      figure.dataset.stacked = "";
    }
    views.push([figure, view]);
    figure.vegaView = view;
    figure.dataset.state = "ready";
    figure.dispatchEvent(new CustomEvent("explorable-ready"));
  }

  async function render(figure, container, spec) {
    const view = new vega.View(vega.parse(spec), {
      renderer: figure.dataset.renderer === "canvas" ? "canvas" : "svg",
      container: container,
      hover: true,
    });
    view.signal("textColor", getComputedStyle(figure).color);
    await view.runAsync();
    return view;
  }

  function show(figure) {
    draw(figure).catch(function (error) {
      figure.dataset.state = "failed";
      console.error("explorable " + figure.dataset.spec + ": " + error.message);
    });
  }

  if (!("IntersectionObserver" in window)) {
    figures.forEach(show);
    return;
  }
  // Start a screen and a half early, so the figure is drawn by the time a
  // reader scrolls to it.
  const observer = new IntersectionObserver(
    function (entries) {
      for (const entry of entries) {
        if (entry.isIntersecting) {
          observer.unobserve(entry.target);
          show(entry.target);
        }
      }
    },
    { rootMargin: "150% 0px" },
  );
  figures.forEach(function (figure) { observer.observe(figure); });
})();
