// The models in the browser: files fetched (and inflated), onnxruntime sessions made once per graph,
// and one image run through a model's graphs. Every number the views show comes from here.
import * as ort from "../vendor/ort.wasm.min.mjs";
import { interleave } from "./numbers.js";
import { site } from "./store.js";

ort.env.wasm.numThreads = 1; // a plain static host gives no cross-origin isolation, so no threads
ort.env.wasm.wasmPaths = new URL("../vendor/", import.meta.url).href;

// What went wrong, kept apart from the runtime's own words (those go to the console, never the page).
// kind: "offline" (could not be downloaded), "missing" (the host has no such file), "damaged" (not usable)
export class SiteError extends Error {
  constructor(kind, url, cause) {
    super(`${kind}: ${url}`, { cause });
    this.kind = kind;
    this.url = url;
  }
}

// the message ids of why a file could not be used and what to do about it (words.js)
export function why(e) {
  if (!(e instanceof SiteError)) return ["cause_browser", "todo_browser"];
  if (e.kind === "offline") return ["cause_offline", "todo_offline"];
  if (e.kind === "missing") return ["cause_missing", "todo_rebuild"];
  return ["cause_damaged", "todo_rebuild"];
}

let progress = null; // (n) => void, told of every n bytes that arrive while a model opens (the progress line)
export function onProgress(fn) {
  progress = fn;
}

// the body of `r`, chunk by chunk while someone watches the progress
async function body(r) {
  if (!progress || !r.body) return new Uint8Array(await r.arrayBuffer());
  const reader = r.body.getReader();
  const parts = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    n += value.length;
    if (progress) progress(value.length);
  }
  const got = new Uint8Array(n);
  let at = 0;
  for (const part of parts) {
    got.set(part, at);
    at += part.length;
  }
  return got;
}

// the response to a request for `url`, or why there is none: "offline" (no answer, or a refusal),
// "missing" (the host has no such file)
async function fetched(url) {
  let r;
  try {
    r = await fetch(url);
  } catch (e) {
    throw new SiteError("offline", url, e);
  }
  if (!r.ok) throw new SiteError(r.status === 404 ? "missing" : "offline", url, `HTTP ${r.status}`);
  return r;
}

export async function bytes(url) {
  const r = await fetched(url);
  try {
    const got = await body(r);
    site.used.add(url);
    return got;
  } catch (e) {
    throw new SiteError("offline", url, e);
  }
}

// A gzipped file, inflated by the browser itself. A host that sends it with `Content-Encoding: gzip`
// has the browser inflate it on arrival: only bytes that start with gzip's magic (1f 8b) are inflated.
export async function inflate(url) {
  const raw = await bytes(url);
  if (raw[0] !== 0x1f || raw[1] !== 0x8b) return raw;
  try {
    return new Uint8Array(await new Response(new Blob([raw]).stream().pipeThrough(new DecompressionStream("gzip"))).arrayBuffer());
  } catch (e) {
    throw new SiteError("damaged", url, e);
  }
}

// A gzipped file inflated while it downloads (a model's weights: most of the first view's wait,
// BENCH.md), not after: its chunks go through the browser's DecompressionStream as they arrive,
// counted for the progress line. Bytes that do not start with gzip's magic (a host that sent it with
// `Content-Encoding: gzip`, which the browser inflated) come back as they are.
export async function inflating(url) {
  const r = await fetched(url);
  if (!r.body) return inflate(url);
  const reader = r.body.getReader();
  let lost = null; // the download's own failure, told apart from the inflating's
  const read = async () => {
    try {
      return await reader.read();
    } catch (e) {
      lost = e;
      throw e;
    }
  };
  const first = await read().catch((e) => {
    throw new SiteError("offline", url, e);
  });
  const source = new ReadableStream({
    start(controller) {
      if (first.value) controller.enqueue(first.value);
      if (first.done) controller.close();
    },
    async pull(controller) {
      const { done, value } = await read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
  });
  const counted = source.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        if (progress) progress(chunk.length);
        controller.enqueue(chunk);
      },
    }),
  );
  const zipped = first.value && first.value[0] === 0x1f && first.value[1] === 0x8b;
  try {
    const got = new Uint8Array(await new Response(zipped ? counted.pipeThrough(new DecompressionStream("gzip")) : counted).arrayBuffer());
    site.used.add(url);
    return got;
  } catch (e) {
    throw new SiteError(lost ? "offline" : "damaged", url, e);
  }
}

let runtime = null; // resolves once the WebAssembly runtime is inflated and handed to onnxruntime (start)
let creating = Promise.resolve(); // onnxruntime makes one session at a time: two at once fail while it starts

export function startRuntime() {
  runtime = inflate("vendor/ort-wasm-simd-threaded.wasm.gz").then((wasm) => {
    performance.mark("capsviz: runtime fetched");
    ort.env.wasm.wasmBinary = wasm;
  });
  runtime.catch(() => null); // said once, by the first session that waits for it
}

// The graph and its weights download and inflate while the runtime does; the session waits for both
async function openGraph(graph) {
  const [model, weights] = await Promise.all([bytes(graph.onnx), graph.weights ? inflating(graph.weights).then(interleave) : null]);
  performance.mark(`capsviz: fetched ${graph.onnx}`);
  await runtime;
  // No graph optimisations: the graphs are small and already in the form they run in, and the
  // optimiser's passes are the most code onnxruntime runs while a session opens, each function of it
  // compiled by the browser on first use (BENCH.md: the first view). The float16 weights' casts then
  // run with each inference, a few milliseconds.
  const options = { executionProviders: ["wasm"], graphOptimizationLevel: "disabled" };
  if (weights) options.externalData = [{ path: graph.name, data: weights }];
  const made = creating.then(() => ort.InferenceSession.create(model, options)).catch((e) => {
    throw new SiteError("damaged", graph.onnx, e); // onnxruntime's words ("protobuf parsing failed") go to the console
  });
  creating = made.catch(() => null);
  made.then(() => performance.mark(`capsviz: session ${graph.onnx}`), () => null);
  return made;
}

// graph: a manifest entry {onnx, weights, name}; one session each, made on first use (and tried again after a failure)
export async function session(graph) {
  if (!site.sessions.has(graph.onnx)) {
    const made = openGraph(graph);
    made.catch(() => site.sessions.delete(graph.onnx));
    site.sessions.set(graph.onnx, made);
  }
  return site.sessions.get(graph.onnx);
}

export function tensor(data, dims) {
  return new ort.Tensor(data instanceof BigInt64Array ? "int64" : "float32", data, dims);
}

export async function imageSet(key) {
  if (!site.images.has(key)) {
    const info = site.manifest.image_sets[key];
    const [, S, C] = key.match(/-([0-9]+)-([0-9]+)$/).map(Number); // DATASET-SIZE-CHANNELS
    const made = inflate(info.file).then((pixels) => {
      if (pixels.length !== info.count * S * S * C) throw new SiteError("damaged", info.file, `${pixels.length} bytes`);
      return { ...info, pixels };
    });
    made.catch(() => site.images.delete(key));
    site.images.set(key, made);
  }
  return site.images.get(key);
}

// test image `index` of model m's set, (C, S, S) in [0, 1] as the app reads it
export function testImage(m, set, index) {
  const n = m.channels * m.in_size * m.in_size;
  return Float32Array.from(set.pixels.subarray(index * n, (index + 1) * n), (v) => v / 255);
}

// every graph and the images of model m, opened at once (not one after another); a SiteError names what failed
export async function prepare(m) {
  const graphs = [...Object.values(m.graphs), site.manifest.graphs.dynamic];
  const [set] = await Promise.all([imageSet(m.images), ...graphs.map(session)]);
  return set;
}

// One image through a model: what every view draws. `rule` picks the routing graph.
export async function computeFor(model, pixels, rule) {
  const S = model.in_size;
  const C = model.channels;
  const enc = await (await session(model.graphs.encoder)).run({ image: tensor(pixels, [1, C, S, S]) });
  const uHat = enc.u_hat;
  const [, J, I, D] = uHat.dims;
  const out = { model, J, I, D, u: enc.u.data, uHat: uHat.data, features: enc.features || null };
  if (rule === "dynamic") {
    const r = await (await session(site.manifest.graphs.dynamic)).run({ u_hat: uHat });
    Object.assign(out, { rule, c: r.c.data, v: r.v.data, agreement: r.agreement.data, T: r.c.dims[0] });
  } else {
    const r = await (await session(model.graphs.attention)).run({ u_hat: uHat });
    Object.assign(out, { rule, c: r.c.data, a: r.a.data, v: r.v.data, T: 1 });
  }
  return out;
}

// One image through a matrix-capsule model (an entry of the manifest's em_models): its class layer's
// votes (I, J, 16) and lower activations, and every EM iteration's R (T, I, J), a (T, J), mu and sigma (T, J, 16)
export async function computeEM(model, pixels) {
  const S = model.in_size;
  const [votes, em] = await Promise.all([session(model.graphs.votes), session(model.graphs.em), imageSet(model.images)]);
  const v = await votes.run({ image: tensor(pixels, [1, model.channels, S, S]) });
  const r = await em.run({ votes: v.votes, a_in: v.a });
  const [, I, J, H] = v.votes.dims;
  return { model, T: r.a.dims[0], I, J, H, votes: v.votes.data, aIn: v.a.data, R: r.R.data, a: r.a.data, mu: r.mu.data, sigma: r.sigma.data };
}

// the reconstructions (B, C, S, S) of B capsule vectors (B, D), each placed in its capsule's slot
export async function decode(model, vectors, capsules) {
  const B = capsules.length;
  const r = await (await session(model.graphs.decoder)).run({
    vectors: tensor(vectors, [B, model.dim]),
    capsules: tensor(BigInt64Array.from(capsules, (j) => BigInt(j)), [B]),
  });
  return r.reconstruction.data;
}

// a routing graph of the manifest's run on toy predictions u_hat (1, J, I, D)
export async function route(graph, uHat, dims) {
  return (await session(graph)).run({ u_hat: tensor(uHat, dims) });
}
