// Search on demand, one language at a time (hooks/search.py writes the
// indexes). Loaded in the page's head, before Material's bundle, which
// requests search/search_index.json (both languages, ~1.6 MB) as soon as a
// page loads. This script sends that request to the page's own language,
// search_index.en.json or search_index.ja.json, and holds it back until the
// reader opens the search (click, tap, or the "/" or "s" shortcut, which
// focus the search box). Material's search then works as before, in
// search-worker.js, which this script starts in place of Material's worker
// (it cuts the reader's query into words, then runs Material's worker).
(function () {
  "use strict";
  var WORKER = new URL("search-worker.js", document.currentScript.src).href;
  var MATERIAL_WORKER = /\/workers\/search\.[\w.]+\.js$/;
  var NativeWorker = window.Worker;
  if (NativeWorker) {
    window.Worker = function (url, options) {
      var address = new URL(String(url), location.href).href;
      if (MATERIAL_WORKER.test(address)) url = WORKER + "#" + encodeURIComponent(address);
      return new NativeWorker(url, options);
    };
    window.Worker.prototype = NativeWorker.prototype;
  }
  var lang = document.documentElement.lang === "ja" ? "ja" : "en";
  var INDEX = /\/search\/search_index\.json$/;
  var wanted = false;
  var waiting = [];
  function want() {
    if (wanted) return;
    wanted = true;
    waiting.splice(0).forEach(function (go) {
      go();
    });
  }
  var open = XMLHttpRequest.prototype.open;
  var send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url) {
    var path = String(url).split(/[?#]/)[0];
    this.searchIndex = INDEX.test(path);
    var args = Array.prototype.slice.call(arguments);
    if (this.searchIndex) {
      args[1] = path.replace(INDEX, "/search/search_index." + lang + ".json");
    }
    return open.apply(this, args);
  };
  XMLHttpRequest.prototype.send = function () {
    var request = this;
    var args = arguments;
    if (request.searchIndex && !wanted) {
      waiting.push(function () {
        send.apply(request, args);
      });
      return;
    }
    return send.apply(request, args);
  };
  document.addEventListener("focusin", function (event) {
    var target = event.target;
    if (target.matches && target.matches("[data-md-component='search-query']")) want();
  });
  document.addEventListener("change", function (event) {
    if (event.target.id === "__search" && event.target.checked) want();
  });
})();
