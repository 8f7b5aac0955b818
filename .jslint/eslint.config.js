// ESLint over the pages' ES modules (api/web/static/js): the recommended rules, browser
// globals, modules only. Run by `make test` (tests/unit/test_javascript.py).
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["**/*.js"],
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: "module",
      globals: { ...globals.browser },
    },
    rules: {
      "no-unused-vars": ["error", { args: "after-used", argsIgnorePattern: "^_" }],
      eqeqeq: ["error", "always"],
      "no-implicit-globals": "error",
      "prefer-const": "error",
    },
  },
];
