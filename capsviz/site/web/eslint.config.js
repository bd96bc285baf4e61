import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["node_modules/"] },
  js.configs.recommended,
  {
    files: ["**/*.js"],
    languageOptions: { ecmaVersion: 2023, sourceType: "module", globals: { ...globals.browser } },
    rules: { "no-unused-vars": ["error", { argsIgnorePattern: "^_" }], eqeqeq: "error", "prefer-const": "error" },
  },
  // the unit tests of the pure modules run in node (node --test: tests/*.test.js)
  { files: ["tests/**/*.js"], languageOptions: { globals: { ...globals.node } } },
];
