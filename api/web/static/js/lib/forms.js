// The pages' forms, sent as JSON (the service takes no form bodies): every form marked
// data-json-form posts its named fields to its action; a 4xx shows each error beside its
// field (the C3/422 body's ``loc``), or above the form; a 2xx answer's ``location`` is
// where the page goes next.

import { describe, postJSON } from "./api.js";
import { h, setText } from "./dom.js";

/** The form's fields as an object: names with dots nest (``bindings.0.repository_key``). */
export function fieldsOf(form) {
  const body = {};
  for (const el of form.elements) {
    if (!el.name || el.disabled || el.type === "submit" || (el.type === "checkbox" && !el.checked)) continue;
    const value = el.dataset.kind === "int" ? Number(el.value) : el.value.trim();
    if (value === "" && el.dataset.optional !== undefined) continue;
    const path = el.name.split(".");
    let at = body;
    path.slice(0, -1).forEach((key, i) => {
      const isIndex = /^\d+$/.test(path[i + 1]);
      at[key] ??= isIndex ? [] : {};
      at = at[key];
    });
    at[path[path.length - 1]] = value;
  }
  return body;
}

function clearErrors(form) {
  for (const el of form.querySelectorAll(".field-error")) el.remove();
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
}

/** Shows each item of a 422 body beside the field its ``loc`` names; answers what found none. */
function showErrors(form, status, body) {
  const unplaced = [];
  const items = Array.isArray(body?.detail) ? body.detail : [];
  for (const item of items) {
    const name = (item.loc || []).slice(1).join(".");
    const field = name && form.querySelector(`[name="${CSS.escape(name)}"]`);
    if (!field) {
      unplaced.push(`${name || "body"}: ${item.msg}`);
      continue;
    }
    field.setAttribute("aria-invalid", "true");
    const note = h("p", { class: "field-error", id: `${field.id || field.name}-error`, role: "alert" }, item.msg);
    field.setAttribute("aria-describedby", note.id);
    field.after(note);
  }
  if (!items.length) unplaced.push(describe(status, body));
  return unplaced;
}

export function jsonForm(form, { onDone } = {}) {
  const status = form.querySelector("[data-form-status]");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(form);
    const submit = form.querySelector('[type="submit"]');
    submit.disabled = true;
    setText(status, "Sending…");
    try {
      const answer = await postJSON(form.getAttribute("action"), fieldsOf(form));
      if (answer.status >= 200 && answer.status < 300) {
        setText(status, "Done.");
        if (onDone) onDone(answer.body);
        else if (answer.body?.location) window.location.assign(answer.body.location);
        return;
      }
      setText(status, showErrors(form, answer.status, answer.body).join("; "));
      form.querySelector('[aria-invalid="true"]')?.focus();
    } finally {
      submit.disabled = false;
    }
  });
}

for (const form of document.querySelectorAll("form[data-json-form]")) {
  if (!form.dataset.jsonFormOwn) jsonForm(form);
}
