// The student's language: the link's lang= first, else the browser's languages (navigator.languages),
// else English; the same choice as capsviz.i18n.best and normalise. Pure: tests/lang.test.js runs it in node.
import { quoted } from "./words.js";

export const SOURCE = "en";

// one of the site's languages for a tag as browsers and links write it ("zh-CN", "zh_Hans", "ja-JP",
// "EN-gb"), or null; Traditional Chinese readers get Simplified Chinese, which they read
export function normalise(tag) {
  if (typeof tag !== "string" || !tag.trim()) return null;
  const first = tag.trim().replace(/_/g, "-").toLowerCase().split("-")[0];
  return { en: "en", zh: "zh-Hans", ja: "ja" }[first] || null;
}

// the first of `preferences` the site speaks, else English
export function best(preferences) {
  for (const tag of preferences || []) {
    const found = normalise(tag);
    if (found) return found;
  }
  return SOURCE;
}

// The language to show for the link's `params` (URLSearchParams) and the browser's `preferred`
// (navigator.languages), among `languages` (the manifest's: tag -> {name}): {lang, notes}, a note
// (link_odd, as address.js's) for a lang= the site does not speak, which then falls back on the browser's.
export function pickLanguage(params, preferred, languages = { en: {}, "zh-Hans": {}, ja: {} }) {
  const notes = [];
  const raw = params.get("lang");
  const fromBrowser = () => {
    const found = best(preferred);
    return found in languages ? found : SOURCE;
  };
  if (raw === null) return { lang: fromBrowser(), notes };
  const asked = normalise(raw);
  if (asked && asked in languages) return { lang: asked, notes };
  const lang = fromBrowser();
  notes.push({ id: "link_odd", values: { name: "lang", raw: quoted(raw), shown: languages[lang]?.name || lang } });
  return { lang, notes };
}
