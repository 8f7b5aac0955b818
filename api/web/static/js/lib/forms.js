// The pages' forms, sent as JSON (the service takes no form bodies): every form marked
// data-json-form posts its named fields to its action; a 4xx shows each error beside its
// field (the C3/422 body's ``loc``), or above the form; after a 2xx the page goes to the
// answer's ``location``, or to the form's data-json-next with ``{field}``s of the answer.
// Fields named ``list.N.field`` are rows of a list: a row whose text fields are all empty
// is left out, and the rest are numbered from 0 (errors find their row again).

import { describe, postJSON } from "./api.js";
import { h, setText } from "./dom.js";

const ROW = /^(.+)\.(\d+)\.[^.]+$/;

function filled(el) {
  return el.tagName !== "SELECT" && el.type !== "checkbox" && el.type !== "hidden" && el.value.trim() !== "";
}

/** ``{body, rows}``: the form's fields as an object (dotted names nest) and, for each list
 * row sent, the row of the form it came from (``{"bindings.0": "bindings.2"}``). */
export function fieldsOf(form) {
  const used = new Set();
  for (const el of form.elements) {
    const row = el.name?.match(ROW);
    if (row && filled(el)) used.add(`${row[1]}.${row[2]}`);
  }
  const body = {};
  const rows = {};
  const numbering = new Map(); // "list.N" in the form -> "list.M" sent
  for (const el of form.elements) {
    if (!el.name || el.disabled || el.type === "submit" || (el.type === "checkbox" && !el.checked)) continue;
    let name = el.name;
    const row = name.match(ROW);
    if (row) {
      const key = `${row[1]}.${row[2]}`;
      if (!used.has(key)) continue;
      if (!numbering.has(key)) {
        const sent = `${row[1]}.${[...numbering.keys()].filter((k) => k.startsWith(`${row[1]}.`)).length}`;
        numbering.set(key, sent);
        rows[sent] = key;
      }
      name = `${numbering.get(key)}${name.slice(key.length)}`;
    }
    const value = el.dataset.kind === "int" ? Number(el.value) : el.value.trim();
    if (value === "" && el.dataset.optional !== undefined) continue;
    const path = name.split(".");
    let at = body;
    path.slice(0, -1).forEach((key, i) => {
      at[key] ??= /^\d+$/.test(path[i + 1]) ? [] : {};
      at = at[key];
    });
    at[path[path.length - 1]] = value;
  }
  return { body, rows };
}

export function clearErrors(form) {
  for (const el of form.querySelectorAll(".field-error")) el.remove();
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
}

/** Shows each item of a 422 body beside the field its ``loc`` names; answers what found none. */
export function showErrors(form, status, body, rows = {}) {
  const unplaced = [];
  const items = Array.isArray(body?.detail) ? body.detail : [];
  for (const item of items) {
    let name = (item.loc || []).slice(1).join(".");
    const row = Object.keys(rows).find((sent) => name.startsWith(`${sent}.`));
    if (row) name = rows[row] + name.slice(row.length);
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
      const { body, rows } = fieldsOf(form);
      const answer = await postJSON(form.getAttribute("action"), body);
      if (answer.status >= 200 && answer.status < 300) {
        setText(status, "Done.");
        const next = form.dataset.jsonNext?.replace(/\{(\w+)\}/g, (_, key) => encodeURIComponent(answer.body?.[key] ?? ""));
        if (onDone) onDone(answer.body);
        else if (next || answer.body?.location) window.location.assign(next || answer.body.location);
        return;
      }
      setText(status, showErrors(form, answer.status, answer.body, rows).join("; "));
      form.querySelector('[aria-invalid="true"]')?.focus();
    } finally {
      submit.disabled = false;
    }
  });
}

for (const form of document.querySelectorAll("form[data-json-form]")) {
  if (!form.dataset.jsonFormOwn) jsonForm(form);
}
