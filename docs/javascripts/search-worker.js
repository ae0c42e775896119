// The search worker: Material's own, with the reader's query cut into words
// first (search-lazy.js starts this script in its place, with the address of
// Material's worker after the "#").
//
// The index holds Japanese text cut into words at build time
// (hooks/search.py, with japanese-words.js); a query is cut here by the same
// code, so 位置補間 is searched as 位置 and 補間, two words of the index.
// Material's worker would otherwise cut each run of kanji itself, by the
// longest words of the index that start it, and its cut drops a run's last
// word (https://github.com/squidfunk/mkdocs-material, search/query/segment:
// it never tries a word that ends the run): 位置補間 became 位置 alone, and
// every page that says 位置 matched as well as the one about 位置補間. That
// cut is switched off below.
//
// One change to the ranking: Material turns off lunr's length normalisation
// (BM25's b = 0), so a long page that names a term once (the glossary) ranks
// above a short section about it, and a long title that contains the query
// above the title that is the query (位置補間と YaRN… above 位置補間). Here b
// is lunr's own default, 0.75. The rest of Material's search is unchanged.
"use strict";
importScripts("japanese-words.js");

// Material's worker cuts the runs of kanji of a query with
// `query.replace(/\p{sc=Han}+/gu, ...)`: that one call leaves the query as it
// is (the words are cut already); every other replace is String's own.
const replace = String.prototype.replace;
String.prototype.replace = function (pattern, replacement) {
  if (pattern instanceof RegExp && pattern.source === "\\p{sc=Han}+") return String(this);
  return replace.call(this, pattern, replacement);
};

// Registered before Material's listener, so it sees each message first.
const QUERY = 2; // Material's SearchMessageType.QUERY
addEventListener("message", (event) => {
  if (event.data && event.data.type === QUERY && typeof event.data.data === "string") {
    event.data.data = self.japaneseWords(event.data.data, " ").trim();
  }
});

importScripts(decodeURIComponent(location.hash.slice(1)));

// Material's worker sets b when it builds the index, after this script has run.
const LENGTH_NORMALISATION = 0.75;
const setB = self.lunr.Builder.prototype.b;
self.lunr.Builder.prototype.b = function () {
  return setB.call(this, LENGTH_NORMALISATION);
};
