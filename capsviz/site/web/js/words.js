// The page's sentences: templates exported by `capsviz site` (the manifest's "messages", written in
// capsviz/site/words.py through capsviz.i18n, so a catalog translates them in one place) with their
// {placeholders} filled here. Pure: tests/words.test.js runs it in node.

// Said before the manifest is read, or when it cannot be: the only sentences kept here
const BEFORE = {
  start_failed: "The site could not open {what}: {cause}; {todo}.",
  what_manifest: "its list of models (site.json)",
  what_runtime: "its runtime",
  what_model: "the model {model}",
  what_file: "the file {file}",
  cause_offline: "it could not be downloaded (is the device offline?)",
  todo_offline: "reconnect and try again",
  cause_missing: "its files are missing from this site",
  cause_damaged: "its files on this site are damaged",
  todo_rebuild: "whoever hosts the site can rebuild it with capsviz site",
  cause_browser: "something in this browser went wrong",
  todo_browser: "reload the page, or try a current Chrome, Firefox or Safari",
};

let table = { ...BEFORE };
let counts = {}; // the manifest's "counted": a message with a singular and a plural, its form for each count
let joiner = " "; // between two sentences: a space in English, none after a Chinese or Japanese full stop

// the manifest's messages (of the language `lang`) replace (and add to) the ones above; `counted`: its counted messages
export function useMessages(messages, lang = "en", counted = {}) {
  table = { ...BEFORE, ...messages };
  counts = counted;
  joiner = lang === "zh-Hans" || lang === "ja" ? "" : " ";
}

// sentences said one after another, as the language writes them (empty ones left out)
export function sentences(...parts) {
  return parts.filter(Boolean).join(joiner);
}

// Chinese and Japanese characters: a space the catalogs keep between one and a placeholder is for a value
// that starts or ends with Latin letters or digits, and goes beside a value that is Chinese or Japanese
// itself, as capsviz.i18n fills the app's messages
const CJK = "\\u3040-\\u30ff\\u3400-\\u9fff\\uf900-\\ufaff";
const CJK_CHAR = new RegExp(`[\\u3000-\\u303f${CJK}\\uff00-\\uffef]`); // a value's end: full-width punctuation counts too
const SPACE_BEFORE = new RegExp(`(?<=[${CJK}]) (\\{([a-z_][a-z0-9_]*)[^{}]*\\})`, "gi");
const SPACE_AFTER = new RegExp(`(\\{([a-z_][a-z0-9_]*)[^{}]*\\}) (?=[${CJK}])`, "gi");

function joined(template, values) {
  const cjkAt = (name, last) => {
    const v = values[name];
    return typeof v === "string" && v !== "" && CJK_CHAR.test(last ? v[v.length - 1] : v[0]);
  };
  return template
    .replace(SPACE_BEFORE, (whole, held, name) => (cjkAt(name, false) ? held : whole))
    .replace(SPACE_AFTER, (whole, held, name) => (cjkAt(name, true) ? held : whole));
}

// `template` with each {name} replaced by values[name], and {name:.2f} or {name:+.0f} written as
// Python's format writes a number so (the app's messages use both); a placeholder without a value is left as written
export function fill(template, values = {}) {
  return joined(template, values).replace(/\{([a-z_][a-z0-9_]*)(?::(\+?)\.([0-9])f)?\}/gi, (whole, name, plus, digits) => {
    if (!(name in values)) return whole;
    if (digits === undefined) return String(values[name]);
    const text = Number(values[name]).toFixed(Number(digits));
    return plus && !text.startsWith("-") ? `+${text}` : text;
  });
}

// message `id` filled with `values`; an unknown id is a programming error, said as such
export function say(id, values = {}) {
  if (!(id in table)) throw new Error(`no message ${id}`);
  return fill(table[id], values);
}

// counted message `id` in its form for `n`, filled with {n} and `values`
export function sayCounted(id, n, values = {}) {
  const form = counts[id] && counts[id][String(n)];
  if (form === undefined) throw new Error(`no message ${id} for ${n}`);
  return fill(form, { n, ...values });
}

// a link's raw value as a note quotes it: at most 24 characters
export function quoted(raw) {
  return raw.length > 24 ? `${raw.slice(0, 24)}...` : raw;
}

// a model's file name as the page names it
export function label(name) {
  return name.replace(".safetensors", "");
}
