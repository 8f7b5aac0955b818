// A pull request page: the diff (drawn by the service) is one tab stop; the arrow keys move
// between its lines, Enter opens the comment form under one. A comment goes to the
// authoring agent's mailbox with the file, the line and the quoted hunk; Publish runs the
// gate thread. The controls exist only for a caller the permission graph allows.

import { config, describe, postJSON } from "./lib/api.js";
import { setText } from "./lib/dom.js";
import { clearErrors, showErrors } from "./lib/forms.js";

const PULL = `/v1/project-factory/projects/${encodeURIComponent(config.project_slug)}/pulls/${config.number}`;
const QUOTE_AROUND = 3; // lines of the hunk quoted either side of the commented one

const diff = document.getElementById("diff");
const form = document.getElementById("comment-form");
const result = document.getElementById("comment-result");
let current = null; // the line the form is open on

function lines() {
  // Not folded away: Chromium lays out a closed <details>' content (content-visibility), so
  // offsetParent does not tell; a closed fold around the line does.
  return [...diff.querySelectorAll(".ln")].filter((line) => !line.closest("details:not([open])"));
}

function focusLine(line) {
  for (const other of diff.querySelectorAll('.ln[tabindex="0"]')) other.removeAttribute("tabindex");
  line.tabIndex = 0;
  line.focus();
}

/** The hunk around ``line`` as a unified diff excerpt (header and up to 3 lines either side). */
function quote(line) {
  const hunk = line.closest(".hunk");
  const all = [...hunk.querySelectorAll(".ln")];
  const at = all.indexOf(line);
  const around = all.slice(Math.max(0, at - QUOTE_AROUND), at + QUOTE_AROUND + 1);
  const header = hunk.querySelector(".hunk-head").textContent.trim();
  return [header, ...around.map((l) => l.querySelector(".src").textContent)].join("\n");
}

function openForm(line) {
  if (!form) return;
  current?.removeAttribute("data-commenting");
  current = line;
  line.setAttribute("data-commenting", "");
  const path = line.closest(".file").dataset.path;
  setText(document.getElementById("comment-where"), `${path}:${line.dataset.line}`);
  clearErrors(form);
  form.elements.path.value = path;
  form.elements.line.value = line.dataset.line;
  line.after(form);
  form.hidden = false;
  form.querySelector("textarea").focus();
}

function closeForm() {
  if (!form) return;
  form.hidden = true;
  current?.removeAttribute("data-commenting");
  if (current) focusLine(current);
  current = null;
}

if (diff) {
  const [first] = lines(); // the diff's tab stop: its first line in view (a hunk may open with a fold)
  if (first) first.tabIndex = 0;
  diff.addEventListener("keydown", (event) => {
    const line = event.target.closest?.(".ln");
    if (!line || event.target !== line) return;
    const shown = lines();
    const at = shown.indexOf(line);
    let next;
    if (event.key === "ArrowDown") next = shown[at + 1];
    else if (event.key === "ArrowUp") next = shown[at - 1];
    else if (event.key === "Home") next = shown[0];
    else if (event.key === "End") next = shown[shown.length - 1];
    else if (event.key === "Enter" && form) {
      event.preventDefault();
      openForm(line);
      return;
    } else return;
    event.preventDefault();
    if (next) focusLine(next);
  });
  diff.addEventListener("click", (event) => {
    const line = event.target.closest(".ln");
    if (!line || !form || window.getSelection()?.toString()) return;
    focusLine(line);
    openForm(line);
  });
}

if (form) {
  document.getElementById("comment-cancel").addEventListener("click", closeForm);
  form.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeForm();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!current) return;
    const body = {
      path: current.closest(".file").dataset.path,
      line: Number(current.dataset.line),
      side: current.classList.contains("del") ? "old" : "new",
      hunk: quote(current),
      body: form.querySelector("textarea").value,
    };
    clearErrors(form);
    const answer = await postJSON(`${PULL}/comments`, body);
    if (answer.status === 202) {
      const woke = answer.body.status === "reopened" ? " It had completed: it works again on your comment." : "";
      setText(result, `Sent to ${answer.body.session_id}'s mailbox (${body.path}:${body.line}).${woke}`);
      result.dataset.state = "ok";
      form.querySelector("textarea").value = "";
      closeForm();
    } else {
      // A 422 names its field (the line, the file, the comment): shown beside it; the rest under the form.
      setText(result, showErrors(form, answer.status, answer.body).join("; "));
      result.dataset.state = "error";
      form.querySelector('[aria-invalid="true"]')?.focus();
    }
  });
}

const publish = document.getElementById("publish");
if (publish) {
  publish.addEventListener("click", async () => {
    publish.disabled = true;
    const out = document.getElementById("publish-result");
    setText(out, "Publishing…");
    const answer = await postJSON(`${PULL}/publish`, {});
    publish.disabled = false;
    if (answer.status === 200) {
      const push = answer.body.push ? `, push ${answer.body.push.status}` : "";
      setText(out, `Published: ${answer.body.status || "done"}${push}.`);
      out.dataset.state = "ok";
    } else {
      setText(out, describe(answer.status, answer.body));
      out.dataset.state = "error";
    }
  });
  publish.disabled = false; // the page came disabled: a click before this would do nothing
}
