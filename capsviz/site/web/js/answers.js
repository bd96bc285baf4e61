// A student's answers to the app's questions (js/asking.js), kept in this browser's storage and
// nowhere else; where the browser refuses storage, for as long as the page is open. Pure but for
// localStorage: tests/asking.test.js runs it in node with a stand-in.

const KEY = "capsviz-answers";
const memory = new Map(); // where answers live when the browser keeps none (storage refused)

function stored() {
  try {
    return JSON.parse(localStorage.getItem(KEY) || "{}");
  } catch {
    return null; // storage refused (some private windows, a file:// page): answers last as long as the page
  }
}

// whether this browser keeps the answers
export function keeps() {
  return stored() !== null;
}

// the student's answer to question `qid` ({choice, reason, at}; choice null for a skip), or null
export function answer(qid) {
  const all = stored();
  return (all ? all[qid] : memory.get(qid)) || null;
}

export function remember(qid, record) {
  const all = stored();
  if (all === null) {
    memory.set(qid, record);
    return;
  }
  all[qid] = record;
  try {
    localStorage.setItem(KEY, JSON.stringify(all));
  } catch {
    memory.set(qid, record);
  }
}
