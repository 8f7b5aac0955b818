// Run surfaces in the office header: the six progress buckets and the badges for cost,
// delivery (pull request, preview), queue state and source reference.

import { config } from "../lib/api.js";
import { h, money, setAttr, setHidden, setText } from "../lib/dom.js";

const BUCKETS = ["active", "moving", "waiting", "blocked", "idle", "completed"];

export class Surfaces {
  constructor({ progress, badges }) {
    this.bars = new Map();
    for (const bucket of BUCKETS) {
      const fill = h("span", { class: "fill" });
      const count = h("span", { class: "count" });
      const item = h(
        "li",
        { class: "bucket", "data-bucket": bucket },
        h("span", { class: "bucket-name" }, bucket),
        h("span", { class: "track", "aria-hidden": "true" }, fill),
        count,
      );
      this.bars.set(bucket, { item, fill, count });
      progress.append(item);
    }
    this.badges = {};
    for (const badge of badges.querySelectorAll("[data-badge]")) this.badges[badge.dataset.badge] = badge.querySelector(".badge-value");
  }

  apply(feed) {
    const p = feed.progress;
    for (const bucket of BUCKETS) {
      const { fill, count } = this.bars.get(bucket);
      const value = p[bucket] || 0;
      fill.style.setProperty("width", `${p.total_agents ? (100 * value) / p.total_agents : 0}%`);
      setText(count, `${value} of ${p.total_agents}`);
    }
    const cost = feed.run_cost;
    setText(this.badges.cost, `${money(cost.total_cost_usd)} · ${cost.agent_count_with_cost} agents`);
    this.#delivery(feed.delivery);
    const q = feed.queue;
    const age = q.heartbeat_age_seconds >= 0 ? ` · heartbeat ${q.heartbeat_age_seconds} s` : "";
    setText(this.badges.queue, `${q.state}${age}`);
    setAttr(this.badges.queue.parentElement, "data-state", q.state);
    const s = feed.source_ref;
    const repos = s.repos.map((r) => `${r.slug}@${r.branch || r.default_branch}`).join(", ");
    setText(this.badges.source, `${s.mode}${repos ? ` · ${repos}` : ""}${s.oci_version ? ` · ${s.oci_version}` : ""}`);
  }

  #delivery(d) {
    const value = this.badges.delivery;
    const key = `${d.status}|${d.pr_url}|${d.preview_url}`;
    if (value.dataset.key === key) return;
    value.dataset.key = key;
    setAttr(value.parentElement, "data-state", d.status);
    const parts = [h("span", {}, d.status)];
    // The pull request's own page on this service (its diff, comments, publication).
    if (d.pr_number > 0) parts.push(" · ", h("a", { href: `/projects/${encodeURIComponent(config.project_slug)}/pulls/${d.pr_number}` }, `PR #${d.pr_number}`));
    if (d.preview_url) parts.push(" · ", h("a", { href: d.preview_url, rel: "noopener noreferrer", target: "_blank" }, "preview"));
    value.replaceChildren(...parts);
    setHidden(value, false);
  }
}
