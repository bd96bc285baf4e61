// Offline: the service worker (sw.js, written by `capsviz site` from capsviz/site/offline.py) keeps
// what this page has used; this says so, and says when a new build has replaced the offline copy.
import { $ } from "./draw.js";
import { site } from "./store.js";
import { label, say } from "./words.js";

// A new build's worker takes over from the old one (and deletes the old copy): this page still runs the old build
let updated = false;
export function watchUpdates() {
  if (!("serviceWorker" in navigator) || !navigator.serviceWorker.controller) return; // the first visit's worker is no update
  navigator.serviceWorker.addEventListener("controllerchange", () => {
    updated = true;
    $("offline").textContent = say("offline_updated");
  });
}

export async function keepOffline() {
  const where = $("offline");
  if (!("serviceWorker" in navigator) || !window.isSecureContext) {
    where.textContent = say("offline_insecure");
    return;
  }
  try {
    await navigator.serviceWorker.register("sw.js");
    const worker = (await navigator.serviceWorker.ready).active;
    const { version, cache: name } = await new Promise((resolve, reject) => {
      const channel = new MessageChannel();
      channel.port1.onmessage = (ev) => resolve(ev.data);
      worker.postMessage("version", [channel.port2]);
      setTimeout(() => reject(new Error("the service worker did not answer")), 10000);
    });
    const cache = await caches.open(name);
    for (const url of site.used) if (!(await cache.match(url))) await cache.add(url); // fetched before the worker took over
    await sayKept(cache, version);
    await offerTheRest(cache, version);
  } catch (e) {
    console.error(e);
    where.textContent = say("offline_refused");
  }
}

// which models `cache` holds whole, said under the header
async function sayKept(cache, version) {
  const kept = [];
  for (const m of [...site.manifest.models, ...(site.manifest.em_models || [])]) {
    const files = Object.values(m.graphs).flatMap((g) => [g.onnx, g.weights].filter(Boolean));
    if ((await Promise.all(files.map((f) => cache.match(f)))).every(Boolean)) kept.push(label(m.name));
  }
  if (!updated) $("offline").textContent = say("offline_kept", { version, models: kept.join(", ") });
}

const MB = (n) => (n / 1e6).toFixed(1);

// the files of the views not yet kept (the manifest's "offline": each file and its bytes)
async function missing(cache) {
  const all = Object.keys(site.manifest.offline || {});
  const kept = await Promise.all(all.map((f) => cache.match(f)));
  return all.filter((_, k) => !kept[k]);
}

let keeping = false; // a "keep every view" in progress: the button waits for it

// the button that keeps every view's files, so the whole lesson works offline after this visit
async function offerTheRest(cache, version) {
  const button = $("keep-all");
  const left = await missing(cache);
  if (keeping) return;
  if (!left.length) {
    button.hidden = true;
    return;
  }
  const sizes = left.map((f) => site.manifest.offline[f]);
  const total = sizes.reduce((a, b) => a + b, 0);
  button.textContent = say("offline_keep_all", { size: MB(total) });
  button.hidden = false;
  button.disabled = false;
  button.onclick = async () => {
    keeping = true;
    button.disabled = true;
    let done = 0;
    try {
      for (const [k, f] of left.entries()) {
        $("offline").textContent = say("offline_keeping", { done: MB(done), total: MB(total) });
        if (!(await cache.match(f))) await cache.add(f);
        done += sizes[k];
      }
      button.hidden = true;
      keeping = false;
      await sayKept(cache, version);
    } catch (e) {
      console.error(e);
      keeping = false;
      button.disabled = false;
      $("offline").textContent = say("offline_keep_failed", { cause: say("cause_offline"), todo: say("todo_offline") });
    }
  };
}
