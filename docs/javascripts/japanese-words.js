// Cuts Japanese text into words, the same way for the search index (at build
// time, in node: hooks/search.py) and for the reader's query (in the browser:
// search-worker.js), so that the words of a query are the words of the index.
// The cut is ICU's dictionary, through Intl.Segmenter (in node and in every
// current browser; nothing to download), with one change: a run of katakana
// stays one word (ICU cuts loanwords such as ファインチューニング into
// pieces). Only runs of kanji and kana are cut; the rest of the text is left
// as it is. `separator` goes between two words and around each run.
(function (root) {
  "use strict";
  // kanji (with 々 〆 〇), hiragana, katakana (with ー, not the middle dot ・)
  const JAPANESE =
    /[\u3005-\u3007\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+/g;
  const KATAKANA = /^[\u30a1-\u30fa\u30fc-\u30ff\uff66-\uff9f]+$/;
  const segmenter =
    typeof Intl === "object" && Intl.Segmenter ? new Intl.Segmenter("ja", { granularity: "word" }) : null;

  function words(run) {
    if (!segmenter) return [run];
    const out = [];
    for (const { segment } of segmenter.segment(run)) {
      const last = out.length - 1;
      if (last >= 0 && KATAKANA.test(segment) && KATAKANA.test(out[last])) out[last] += segment;
      else out.push(segment);
    }
    return out;
  }

  function japaneseWords(text, separator) {
    return text.replace(JAPANESE, (run) => separator + words(run).join(separator) + separator);
  }

  if (typeof module === "object" && module.exports) module.exports = japaneseWords;
  else root.japaneseWords = japaneseWords;
})(this);
