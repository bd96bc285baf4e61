import assert from "node:assert/strict";
import { test } from "node:test";
import { readDims, readEM, readModel, readPoints, readSite, writeLink } from "../js/address.js";
import { say, useMessages } from "../js/words.js";
import { NO_WORDS, manifest } from "./fixture.js";

const q = (s) => new URLSearchParams(s);
const said = (notes) => notes.map((n) => say(n.id, n.values));

test("a plain link is read without a note, and written back the same", { skip: NO_WORDS }, () => {
  const m = manifest();
  useMessages(m.messages);
  const site = readSite(q("view=routing&model=a.safetensors&preset=outliers&J=2"), m);
  assert.deepEqual(site.notes, []);
  assert.equal(site.got.view, "routing");
  assert.equal(site.got.model, "a.safetensors");
  assert.equal(site.got.toy.preset, "outliers");
  assert.equal(site.got.toy.J, 2);
  const model = readModel(q("image=4&iterations=5&t=2&step=2&dims=0,0.1"), m, m.models[0], 10, "dynamic");
  assert.deepEqual(model.notes, []);
  const state = { ...site.got, ...model.got, drawn: null, toy: site.got.toy };
  assert.equal(writeLink(state, "a.safetensors", true), "?view=routing&model=a.safetensors&image=4&dims=0%2C0.1%2C0%2C0&iterations=5&t=2&step=2");
});

test("the views and routings are the manifest's, not the front end's", { skip: NO_WORDS }, () => {
  const m = manifest();
  useMessages(m.messages);
  const views = m.views.map((v) => v.key);
  for (const v of views) assert.equal(readSite(q(`view=${v}`), m).got.view, v);
  const odd = readSite(q("view=lab&rule=em"), m);
  assert.equal(odd.got.view, views[0]);
  assert.deepEqual(said(odd.notes), [
    `The link asks for view=lab, which this site does not have; it shows ${m.views[0].called} instead.`,
    `The link asks for rule=em, which this site does not have; it shows ${say("shown_agreement")} instead.`,
  ]);
});

test("every odd parameter says what it asked and what is shown", { skip: NO_WORDS }, () => {
  const m = manifest();
  useMessages(m.messages);
  const site = readSite(q("model=nope&preset=zz&J=4&T=11&cap=0&colour=red&embed=2"), m);
  const text = said(site.notes).join(" ");
  for (const part of ["model=nope", "the model a", "preset=zz", "the preset agree", "J=4", "T=11", "cap=0", "colour=red", "left out", "embed=2"]) assert.ok(text.includes(part), part);
  assert.equal(site.got.toy.T, 3);
  const model = readModel(q("image=1e308&capsule=NaN&iterations=0&step=9"), m, m.models[0], 10, "dynamic");
  const words = said(model.notes).join(" ");
  for (const part of ["image=1e308", "from 0 to 9", "capsule=NaN", "the longest capsule", "iterations=0", "step=9"]) assert.ok(words.includes(part), part);
  assert.equal(model.got.image, 0);
  assert.equal(model.got.capsule, null);
  assert.equal(model.got.iterations, 2); // the model's own
  const onePass = readModel(q("iterations=5"), m, m.models[1], 10, "self-attention");
  assert.match(said(onePass.notes)[0], /iterations=5, but b routes in one pass/);
  assert.equal(onePass.got.iterations, 3); // kept for routing=dynamic
});

test("a step past the tour's last opens the last, as the app does, and says so", { skip: NO_WORDS }, () => {
  const m = manifest();
  useMessages(m.messages);
  const model = m.models[0]; // a tour of 3 steps
  const step = (query, steps) => {
    const got = readModel(q(query), m, model, 10, "dynamic", "tour", steps);
    return [got.got.step, said(got.notes)];
  };
  assert.deepEqual(step("step=3"), [3, []]);
  assert.deepEqual(step("step=99"), [3, ["The link asks for step=99, not a whole number from 1 to 3; it shows 3 instead."]]);
  assert.deepEqual(step("step=0")[0], 1);
  assert.deepEqual(step("step=-4")[0], 1);
  assert.deepEqual(step("step=2.5"), [1, ["The link asks for step=2.5, not a whole number from 1 to 3; it shows 1 instead."]]);
  assert.deepEqual(step("step=1e308")[0], 3);
  assert.deepEqual(step("step=NaN")[0], 1);
  assert.deepEqual(step("step=99", 7), [7, ["The link asks for step=99, not a whole number from 1 to 7; it shows 7 instead."]]); // the EM model's tour
});

test("dims and pts: clamped or refused, and said", { skip: NO_WORDS }, () => {
  useMessages(manifest().messages);
  const dims = readDims("0,9,x,0.1", 4);
  assert.deepEqual(Array.from(dims.dims, (v) => +v.toFixed(2)), [0, 0.25, 0, 0.1]);
  assert.match(say(dims.notes[0].id, dims.notes[0].values), /d1=9 as 0.25, d2=x as 0.00/);
  assert.deepEqual(readDims(null).notes, []);
  const pg = { lower: 1, limit: 6 };
  assert.deepEqual(readPoints("1_2_3_4_5_6", pg), { pts: [1, 2, 3, 4, 5, 6], notes: [] });
  assert.deepEqual(readPoints("1_9_3_4_5_-7", pg).pts, [1, 6, 3, 4, 5, -6]);
  assert.equal(readPoints("1_2", pg).pts, null);
  assert.equal(readPoints("1_2", pg).notes[0].id, "link_pts_count");
});

test("the EM view keeps its iteration in the link, and says what it cannot show", { skip: NO_WORDS }, () => {
  const m = manifest();
  useMessages(m.messages);
  const em = m.em_models[0];
  assert.deepEqual(readEM(q("view=em&t=1"), em), { got: { t: 1 }, notes: [] });
  assert.equal(readEM(q("view=em"), em).got.t, null); // the last iteration
  const odd = readEM(q("view=em&t=9&iterations=5"), em);
  assert.equal(odd.got.t, null);
  const words = said(odd.notes).join(" ");
  for (const part of ["t=9", "from 1 to 2", "iterations=5", "its own 2 iterations"]) assert.ok(words.includes(part), part);
  // the routing view's t is not read on the EM view, nor noted there
  assert.deepEqual(readModel(q("view=em&t=9"), m, m.models[0], 10, "dynamic", "em").notes, []);
  const state = { ...readSite(q("view=em"), m).got, image: 3, drawn: null, capsule: null, dims: new Float32Array(4), iterations: 2, t: 2, step: 1, em: { t: 1 } };
  assert.equal(writeLink(state, "a.safetensors", true), "?view=em&model=a.safetensors&image=3&t=1&step=1");
});

test("tour=em follows the EM model; a site without one says so", { skip: NO_WORDS }, () => {
  const m = manifest();
  useMessages(m.messages);
  const site = readSite(q("view=tour&tour=em"), m);
  assert.equal(site.got.tourOf, "m.safetensors");
  assert.deepEqual(site.notes, []);
  const state = { ...site.got, image: 0, drawn: null, capsule: null, dims: new Float32Array(4), iterations: 2, t: 2, step: 4, em: { t: null } };
  assert.match(writeLink(state, "a.safetensors", true), /&tour=em/);
  const without = readSite(q("view=tour&tour=em"), { ...m, em_models: [] });
  assert.equal(without.got.tourOf, null);
  assert.match(said(without.notes)[0], /tour=em, which this site does not have; it shows the open model's tour instead/);
});
