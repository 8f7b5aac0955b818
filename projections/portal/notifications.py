"""Notifications as read models.

- ``notify_outbox``: what run events ask to notify (a blocker, a delivery, a run ready for
  review), one document per event position. A fold writes documents and never sends: the
  relay worker (workers.notify_relay) delivers, and the inbox records each notification id
  once, so a rebuild or a replay of this model re-fires nothing.
- ``inbox``: each subscriber's notifications, from the inbox's events.
"""

from __future__ import annotations

from domain.portal import events as pv
from domain.studio import events as ev
from projections.engine.docs import Docs, Projector
from projections.engine.envelope import Envelope
from projections.projects.pulls import pull_page_url

OUTBOX = "notify_outbox"
INBOX = "inbox"
FEED = "/control-plane/studio/observability-feed"


def outbox_key(position: int) -> str:
    return f"outbox/{position:012d}"


def inbox_partition(tenant: str, subject_key: str) -> str:
    return f"inbox/{tenant}/{subject_key.lower()}"


class NotifyOutboxProjector(Projector):
    name = OUTBOX
    topics = frozenset({"Run.Launched", "Run.Completed", "AgentSession.Blocked", "AgentSession.PullRequestOpened"})

    def apply(self, env: Envelope, docs: Docs) -> None:
        e, tenant, run_id = env.event, env.tenant, env.run_id
        link_key = f"outbox-run/{tenant}/{run_id}"
        if isinstance(e, ev.RunLaunched):
            docs.put(link_key, {"project_slug": e.project_slug}, partition="outbox-run")
            return
        link = docs.get(link_key)
        if link is None:
            return
        slug = link["project_slug"]
        url = f"{FEED}?project_slug={slug}&run_id={run_id}"
        if isinstance(e, ev.Blocked):
            kind, title, body = "blocker", f"Blocked in run {run_id}", f"{e.code}: {e.message}"
        elif isinstance(e, ev.PullRequestOpened):
            if e.repository_key == "assembly":  # orchestration output, not a delivery
                return
            kind, title, body = "delivery", f"Pull request opened in run {run_id}", e.pr_url
            url = pull_page_url(slug, e.pr_number)  # its review page, not the (unreachable) vcs host
        elif isinstance(e, ev.RunCompleted):
            kind, title, body = "review", f"Run {run_id} completed: ready for review", ""
        doc = {
            "tenant": tenant,
            "project_slug": slug,
            "kind": kind,
            "title": title,
            "body": body,
            "url": url,
            "source_ref": f"event:{env.position}",
        }
        docs.put(outbox_key(env.position), doc, partition="outbox", sort_key=f"{env.position:012d}")


class InboxProjector(Projector):
    name = INBOX
    topics = frozenset({"Inbox.NotificationRaised", "Inbox.NotificationRead"})

    def apply(self, env: Envelope, docs: Docs) -> None:
        e, tenant = env.event, env.tenant
        subject = ":".join(env.scope[2:])
        if isinstance(e, pv.NotificationRaised):
            note = e.notification
            doc = {**note, "via": e.via, "created_at": e.at, "read_at": ""}
            docs.put(f"inbox/{tenant}/{subject}/{note['notification_id']}", doc,
                     partition=inbox_partition(tenant, subject), sort_key=f"{e.at}|{note['notification_id']}", status="unread")
            return
        if not isinstance(e, pv.NotificationRead):
            return
        key = f"inbox/{tenant}/{subject}/{e.notification_id}"
        doc = docs.get(key)
        if doc is not None:
            doc["read_at"] = e.at
            docs.put(key, doc, partition=inbox_partition(tenant, subject), sort_key=f"{doc['created_at']}|{doc['notification_id']}",
                     status="read")
