import assert from "node:assert/strict";
import { test } from "node:test";
import { best, normalise, pickLanguage } from "../js/lang.js";

const LANGS = { en: { name: "English" }, "zh-Hans": { name: "简体中文" }, ja: { name: "日本語" } };
const pick = (query, preferred) => pickLanguage(new URLSearchParams(query), preferred, LANGS);

test("a tag as browsers and links write it gives one of the site's languages", () => {
  for (const [tag, lang] of [["zh-CN", "zh-Hans"], ["zh_Hans", "zh-Hans"], ["zh-TW", "zh-Hans"], ["ZH", "zh-Hans"], ["ja-JP", "ja"], ["EN-gb", "en"]]) assert.equal(normalise(tag), lang, tag);
  for (const tag of ["fr", "", "  ", null, undefined, 3]) assert.equal(normalise(tag), null);
  assert.equal(best(["fr-FR", "de", "ja-JP", "en"]), "ja");
  assert.equal(best(["fr"]), "en");
  assert.equal(best([]), "en");
});

test("the link's lang= comes before the browser's languages", () => {
  assert.deepEqual(pick("lang=ja", ["zh-CN", "en"]), { lang: "ja", notes: [] });
  assert.deepEqual(pick("view=tour&lang=zh-Hans", ["ja"]), { lang: "zh-Hans", notes: [] });
  assert.deepEqual(pick("lang=en", ["ja"]), { lang: "en", notes: [] });
  assert.deepEqual(pick("lang=zh-CN", ["en"]), { lang: "zh-Hans", notes: [] });
});

test("without lang=, the first of the browser's languages the site speaks; else English", () => {
  assert.equal(pick("", ["fr-FR", "zh-TW", "ja"]).lang, "zh-Hans");
  assert.equal(pick("view=explore", ["ja-JP", "en-US"]).lang, "ja");
  assert.equal(pick("", ["en-US", "ja"]).lang, "en");
  assert.equal(pick("", ["de", "fr"]).lang, "en");
  assert.equal(pick("", undefined).lang, "en");
  assert.deepEqual(pick("", ["ko"]).notes, []);
});

test("an odd lang= is said, and the browser's language shown instead", () => {
  const got = pick("lang=klingon", ["ja-JP"]);
  assert.equal(got.lang, "ja");
  assert.deepEqual(got.notes, [{ id: "link_odd", values: { name: "lang", raw: "klingon", shown: "日本語" } }]);
  assert.equal(pick("lang=", ["de"]).notes[0].values.shown, "English");
  assert.equal(pick(`lang=${"x".repeat(40)}`, []).notes[0].values.raw.length, 27);
});

test("a language the manifest lacks is not chosen", () => {
  const only = { en: { name: "English" } };
  assert.deepEqual(pickLanguage(new URLSearchParams(""), ["ja"], only), { lang: "en", notes: [] });
  assert.equal(pickLanguage(new URLSearchParams("lang=ja"), ["ja"], only).notes.length, 1);
});
