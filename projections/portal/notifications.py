"""Notifications as read models.

- ``notify_outbox``: what run events ask to notify (a blocker, a delivery, a run ready for
  review), one document per event position. A fold writes documents and never sends: the
  relay worker (workers.notify_relay) delivers, and the inbox records each notification id
  once, so a rebuild or a replay of this model re-fires nothing.
- ``inbox``: each subscriber's notifications, from the inbox's events.

A notification links a page a person opens: a pull request's review page, else its run's
office. Notifications stored before that linked the run's feed (the API's JSON) and named a
pull request by its address on the VCS host, which goes nowhere; the inbox shows those with
the office's link and without that address (the stored events stay as they are).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from domain.portal import events as pv
from domain.studio import events as ev
from projections.engine.docs import Docs, Projector, handles
from projections.engine.envelope import Envelope
from projections.projects.pulls import number_pull_request, pull_page_url

OUTBOX = "notify_outbox"
INBOX = "inbox"
FEED = "/control-plane/studio/observability-feed"


def office_url(run_id: str) -> str:
    return f"/runs/{run_id}"


def shown(note: dict[str, Any]) -> dict[str, Any]:
    """A stored notification as a person sees it: an older one's feed link becomes its run's
    office, and a body that is only the pull request's VCS address is dropped (the title and
    the link say which)."""
    url, body = str(note.get("url", "")), str(note.get("body", ""))
    if url.startswith(FEED + "?"):
        run_id = (parse_qs(urlsplit(url).query).get("run_id") or [""])[0]
        url = office_url(run_id) if run_id else url
    if note.get("kind") == "delivery" and "://" in body and " " not in body.strip():
        body = ""
    return {**note, "url": url, "body": body}


def outbox_key(position: int) -> str:
    return f"outbox/{position:012d}"


def inbox_partition(tenant: str, subject_key: str) -> str:
    return f"inbox/{tenant}/{subject_key.lower()}"


class NotifyOutboxProjector(Projector):
    name = OUTBOX

    @handles(ev.RunLaunched)
    def run_launched(self, e: ev.RunLaunched, env: Envelope, docs: Docs) -> None:
        docs.put(f"outbox-run/{env.tenant}/{env.run_id}", {"project_slug": e.project_slug}, partition="outbox-run")

    @handles(ev.Blocked)
    def blocked(self, e: ev.Blocked, env: Envelope, docs: Docs) -> None:
        self._raise(env, docs, "blocker", f"Blocked in run {env.run_id}", f"{e.code}: {e.message}")

    @handles(ev.PullRequestOpened)
    def pull_request_opened(self, e: ev.PullRequestOpened, env: Envelope, docs: Docs) -> None:
        link = docs.get(f"outbox-run/{env.tenant}/{env.run_id}")
        if link is None:
            return
        # Numbered as the pulls read model numbers it (every pull request counts, assembly too).
        number = number_pull_request(env.tenant, link["project_slug"], e, docs)
        if e.repository_key != "assembly":  # orchestration output, not a delivery
            body = f"#{number} {e.title}" if e.title else f"#{number} by {env.agent_id} on {e.repository_key}"
            self._raise(env, docs, "delivery", f"Pull request #{number} opened in {link['project_slug']}", body,
                        pr_number=number)

    @handles(ev.RunCompleted)
    def run_completed(self, e: ev.RunCompleted, env: Envelope, docs: Docs) -> None:
        self._raise(env, docs, "review", f"Run {env.run_id} completed: ready for review", "")

    @staticmethod
    def _raise(env: Envelope, docs: Docs, kind: str, title: str, body: str, *, pr_number: int | None = None) -> None:
        """A notification of the run's project, linking its office (a pull request's: its review
        page, not the unreachable vcs host)."""
        tenant, run_id = env.tenant, env.run_id
        link = docs.get(f"outbox-run/{tenant}/{run_id}")
        if link is None:
            return
        slug = link["project_slug"]
        doc = {
            "tenant": tenant,
            "project_slug": slug,
            "kind": kind,
            "title": title,
            "body": body,
            "url": office_url(run_id) if pr_number is None else pull_page_url(slug, pr_number),
            "source_ref": f"event:{env.position}",
        }
        docs.put(outbox_key(env.position), doc, partition="outbox", sort_key=f"{env.position:012d}")


class InboxProjector(Projector):
    name = INBOX

    @handles(pv.NotificationRaised)
    def notification_raised(self, e: pv.NotificationRaised, env: Envelope, docs: Docs) -> None:
        tenant, subject, note = env.tenant, ":".join(env.scope[2:]), e.notification
        doc = {**shown(note), "via": e.via, "created_at": e.at, "read_at": ""}
        docs.put(f"inbox/{tenant}/{subject}/{note['notification_id']}", doc,
                 partition=inbox_partition(tenant, subject), sort_key=f"{e.at}|{note['notification_id']}", status="unread")

    @handles(pv.NotificationRead)
    def notification_read(self, e: pv.NotificationRead, env: Envelope, docs: Docs) -> None:
        tenant, subject = env.tenant, ":".join(env.scope[2:])
        key = f"inbox/{tenant}/{subject}/{e.notification_id}"
        doc = docs.get(key)
        if doc is not None:
            doc["read_at"] = e.at
            docs.put(key, doc, partition=inbox_partition(tenant, subject), sort_key=f"{doc['created_at']}|{doc['notification_id']}",
                     status="read")

