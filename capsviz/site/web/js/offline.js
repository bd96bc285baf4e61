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
    const kept = [];
    for (const m of [...site.manifest.models, ...(site.manifest.em_models || [])]) {
      const files = Object.values(m.graphs).flatMap((g) => [g.onnx, g.weights].filter(Boolean));
      if ((await Promise.all(files.map((f) => cache.match(f)))).every(Boolean)) kept.push(label(m.name));
    }
    if (!updated) where.textContent = say("offline_kept", { version, models: kept.join(", ") });
  } catch (e) {
    console.error(e);
    where.textContent = say("offline_refused");
  }
}
