"""The site kept for offline use: a service worker (sw.js, written by `capsviz site`) that stores the
page, the runtime, the words of each language and every model a student has opened (or every file of
every view, when the student asks: the manifest's "offline" list), and a version that names the build.

A browser checks sw.js for changes on each visit; a new build writes a new version into it, so the
new worker stores the new files under a new name and deletes the old copy. The worker's source lives
here rather than in web/ because the build fills in the version and the list of files.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

CACHE_PREFIX = "capsviz-"

# Cache first: everything under these names is the build's own, and a new build has a new version.
# Other requests (none the site makes) go to the network untouched.
_WORKER = """// capsviz's service worker (written by `capsviz site`): keeps the page, the runtime and the models a
// student opened, so the site works offline after one visit. A new build changes VERSION, and the
// browser then installs this worker anew: it stores the new files and deletes the old copy.
const VERSION = __VERSION__;
const SHELL = __SHELL__; // stored on install; models and images are stored when the page first asks for them
const CACHE = `__PREFIX__${VERSION}`;
const KEPT = /^(models|graphs|data|vendor|js|tours|questions)\\/|^(index\\.html|site\\.js|site\\.css|site\\.json|words-[A-Za-z-]+\\.json)$/;

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(SHELL.map((f) => new Request(f, { cache: "reload" }))))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((names) => Promise.all(names.filter((n) => n.startsWith("__PREFIX__") && n !== CACHE).map((n) => caches.delete(n))))
      .then(() => self.clients.claim()),
  );
});

async function answer(request, file) {
  const cache = await caches.open(CACHE);
  const kept = await cache.match(file || request, { ignoreSearch: file !== null });
  if (kept) return kept;
  const got = await fetch(request);
  if (got.ok && file === null) await cache.put(request, got.clone());
  return got;
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const scope = new URL(self.registration.scope);
  const url = new URL(request.url);
  if (url.origin !== scope.origin || !url.pathname.startsWith(scope.pathname)) return;
  const path = url.pathname.slice(scope.pathname.length);
  if (request.mode === "navigate" || path === "") event.respondWith(answer(request, "index.html"));
  else if (KEPT.test(path)) event.respondWith(answer(request, null));
});

self.addEventListener("message", (event) => {
  if (event.data === "version" && event.ports[0]) event.ports[0].postMessage({ version: VERSION, cache: CACHE });
});
"""


def version(out: Path, manifest: bytes) -> str:
    """12 hex digits naming the site's files in `out` (all but sw.js and site.json) and its manifest."""
    h = hashlib.sha256(manifest)
    for f in sorted(p for p in out.rglob("*") if p.is_file() and p.relative_to(out).as_posix() not in ("sw.js", "site.json")):
        h.update(f.relative_to(out).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def service_worker(version: str, shell: list[str]) -> str:
    """sw.js for a build of this `version`, storing the files `shell` (relative to the site) on install."""
    return _WORKER.replace("__VERSION__", json.dumps(version)).replace("__SHELL__", json.dumps(shell)).replace("__PREFIX__", CACHE_PREFIX)
