"""The local execution plane: each agent session is a real agent CLI process on this
machine, in its own git worktree, and its JSON stream becomes the simulator's steps.

At every tick the plane reconciles the processes with the sessions as the log has them:
- a ``ready`` session gets a process (through the bounded FIFO pool); a ready session whose
  process already started, was restarted by a verb or a policy: the old process ends and a
  new one starts in the same worktree (recreated first after ``restart_workspace`` or for a
  fresh workspace);
- a ``paused`` session's process is stopped (SIGSTOP) and continued (SIGCONT) on resume; an
  ended session's process is terminated (SIGTERM, then SIGKILL); a switch of process ends
  the process so the new assignment starts in the same worktree;
- the lines the process wrote since the last tick are parsed into steps; a process that
  made no tool call within the first-tool window raises ``agent_first_tool_required``; one
  that ended without a result, ``agent_process_exited``; stderr, malformed lines and exits
  are runtime logs (``sandbox/runner-stdout``), never a failure of the ticker.
After each ticker pass, the runs that ended (completed or cleaned up) lose their processes
and worktrees.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from domain.shared import agent_tokens, ports
from domain.studio.agent_stream import Started, StreamReader, excerpt
from domain.studio.agent_tools import StepTranslator
from domain.studio.brief import brief
from domain.studio.policies.blockers import (
    SOURCE_MATERIALIZATION_FAILED,
)
from domain.studio.policies.credentials import CredentialCheck
from domain.studio.session import PAUSED, READY, STOPPED, WAITING_FIRST_TOOL, WORKING
from workers.planes.local import sandbox_steps, walls, work
from workers.planes.local.forward import Forwarder
from workers.planes.local.launch import LocalConfig, MissingCommand, agent_identity, prepare
from workers.planes.local.process import AgentProcess, ProcessPool
from workers.planes.local.sandbox import SandboxUnavailable
from workers.planes.local.worktrees import WorktreeError, Worktrees

log = structlog.get_logger("squadops.local_plane")

LOGS_PER_TICK = 20
SWEEP_SECONDS = 0.5  # how often runs this plane did not tick are looked up (did they end?)


@dataclass
class Handle:
    """This plane's process for one session, and what it has seen of it."""

    key: str
    tenant: str
    run_id: str
    agent_id: str
    process: AgentProcess
    workspace_name: str
    expected_attempt: int
    session_id: str = ""
    worktree: Path | None = None
    author: str = ""
    step: str = ""
    reader: StreamReader = field(default_factory=StreamReader)
    translator: StepTranslator | None = None
    llm_session_id: str = ""
    started_seen_at: float = 0.0
    confirmed: bool = False
    exit_tick: int = -1
    ended_at: float = 0.0
    paused_at: float = 0.0
    confinement: dict[str, Any] = field(default_factory=dict)


class LocalPlane:
    """Runs agent CLIs as subprocesses in git worktrees (``SQUADOPS_EXECUTION_PLANE=local``)."""

    name = "local"

    def __init__(
        self, config: LocalConfig, load_run: Callable[[str, str], Any] | None = None, sweep_seconds: float = SWEEP_SECONDS
    ) -> None:
        self.config = config
        self.load_run = load_run
        self.sweep_seconds = sweep_seconds
        self.worktrees = Worktrees(config.data_dir, config.vcs_root,
                                   config.sandbox if config.sandbox.enabled else None)
        self.pool = ProcessPool(config.max_processes)
        self.forwarder = Forwarder()  # the sandboxed agents' only way out (their MCP and model addresses)
        self.handles: dict[str, Handle] = {}
        self.marks: dict[str, tuple[int, int]] = {}  # key -> (workspace_restarts, generation) of its worktree
        self.workspaces: dict[str, Path] = {}  # workspace name -> worktree
        self.retiring: dict[str, Handle] = {}  # ended by the plane, not exited yet (its work kept once it has)
        self._planned: dict[tuple[str, str], tuple[int, list[ports.Step]]] = {}  # run -> its last tick's steps
        self.known_runs: set[tuple[str, str]] = set()
        self._ticked: set[tuple[str, str]] = set()
        self._queued_logged: set[str] = set()
        self._last_sweep = 0.0
        self._scanned = False
        self._lock = threading.RLock()

    # -- the port -----------------------------------------------------------------------

    def plan_tick(self, run: Any, sessions: Sequence[Any], tick: int) -> list[ports.Step]:
        with self._lock:
            self._ticked.add((run.tenant, run.run_id))
            self.known_runs.add((run.tenant, run.run_id))
            if sessions and all(s.ended for s in sessions):
                steps = [step for s in sessions for step in self._ended(s, final=True)]
                return steps + [ports.CompleteRun(summary={"sessions": len(sessions)})]
            planned = self._planned.get((run.tenant, run.run_id))
            if planned is not None and planned[0] == tick:
                # The same tick again: its save failed (a concurrent command), so what the
                # processes wrote then is planned again, with what they wrote since.
                steps = planned[1] + [
                    step for s in sessions if s.id in self.handles and s.live_status != PAUSED
                    for step in self._name_heads(run, self._drain(run, s, self.handles[s.id], reoffer=False))
                ]
            else:
                steps = self._settle_retiring(run)
                for session in sorted(sessions, key=lambda s: s.agent_id):
                    try:
                        steps.extend(self._session(run, session, tick))
                    except Exception as exc:  # one session's trouble never stops the ticker
                        log.warning("local_session_failed", agent_id=session.agent_id, error=repr(exc))
                        steps.append(self._log(session.agent_id, "error", f"local plane: {exc!r}", "exit"))
            self._planned[(run.tenant, run.run_id)] = (tick, steps)
            return list(steps)

    def after_pass(self) -> None:
        """Ends the processes and removes the worktrees of runs that ended since."""
        with self._lock:
            ticked, self._ticked = self._ticked, set()
            if self.load_run is None or time.monotonic() - self._last_sweep < self.sweep_seconds:
                return
            self._last_sweep = time.monotonic()
            if not self._scanned:
                # Worktrees left by an earlier life of the service are swept like the others.
                self._scanned = True
                self.known_runs |= set(self.worktrees.runs_on_disk())
            for tenant, run_id in sorted(self.known_runs - ticked):
                run = self.load_run(tenant, run_id)
                if run is None or run.ended:
                    try:
                        self.end_run(tenant, run_id)
                    except Exception as exc:  # a worktree git will not remove waits for the next life
                        log.warning("local_run_cleanup_failed", run_id=run_id, error=repr(exc))
                        self.known_runs.discard((tenant, run_id))

    def end_run(self, tenant: str, run_id: str) -> None:
        """Stops every process of the run, commits what each agent left uncommitted onto its
        branch, and removes the worktrees that are then wholly in refs (the others stay)."""
        with self._lock:
            for key in [k for k in list(self.pool.waiting) if k.startswith(f"ses:{tenant}:{run_id}:")]:
                self.pool.cancel(key)
            ending = [h for h in self.handles.values() if (h.tenant, h.run_id) == (tenant, run_id)]
            ending += [h for h in self.retiring.values() if (h.tenant, h.run_id) == (tenant, run_id)]
            for handle in ending:
                self.handles.pop(handle.key, None)
                self.retiring.pop(handle.key, None)
                handle.process.stop(self.config.stop_grace_seconds)
            # Each got SIGTERM, and SIGKILL after the grace: their worktrees are still again soon.
            deadline = time.monotonic() + self.config.stop_grace_seconds + 2
            for handle in ending:
                handle.process.wait(max(deadline - time.monotonic(), 0.0))
            authors = {h.agent_id: h.author for h in ending}
            work.keep_run(self.worktrees, self.config.data_dir, tenant, run_id, authors)
            removed, kept = self.worktrees.remove_run(tenant, run_id)
            self.workspaces = {n: p for n, p in self.workspaces.items() if p not in removed}
            self.known_runs.discard((tenant, run_id))
            self._planned.pop((tenant, run_id), None)
            if kept:
                log.warning("local_worktrees_kept", run_id=run_id, kept=[str(p) for p in kept])
            log.info("local_run_cleaned", run_id=run_id, worktrees=len(removed))

    def close(self) -> None:
        """Stops every process and commits what each left uncommitted (worktrees stay for the
        runs that go on after a restart); the sandboxes' forwarders stop last."""
        with self._lock:
            ending = list(self.handles.values()) + list(self.retiring.values())
            self.handles.clear()
            self.retiring.clear()
            for handle in ending:
                handle.process.stop(self.config.stop_grace_seconds)
        deadline = time.monotonic() + self.config.stop_grace_seconds + 1
        for handle in ending:
            if handle.process.wait(max(deadline - time.monotonic(), 0.0)):
                self._keep_work(handle, "service stopped")
        self.forwarder.close_all()

    def probe_workspace(self, lease: Any) -> str:
        """A worktree of this machine is ``connected`` while it is a git worktree."""
        path = self.workspaces.get(lease.workspace_name)
        if path is None:
            return "unknown"
        return "connected" if self.worktrees.is_worktree(path) else "missing"

    def check_credentials(self, run: Any, session: Any) -> CredentialCheck:
        """A model proxy given without its token cannot resolve the agent's credentials."""
        if self.config.model_proxy_base_url and not (self.config.model_proxy_token or self.config.own_model_proxy):
            return CredentialCheck(profile_resolved=False)
        return CredentialCheck(profile_resolved=True)

    def changes(self, run: Any, agent_id: str) -> ports.BranchChanges | None:
        """The agent's branch against its lane's default branch (``ports.WorkBranches``)."""
        return self.worktrees.changes(run, agent_id)

    def process_of(self, session_key: str) -> AgentProcess | None:
        handle = self.handles.get(session_key)
        return handle.process if handle else None

    # -- one session ----------------------------------------------------------------------

    def _session(self, run: Any, s: Any, tick: int) -> list[ports.Step]:
        handle = self.handles.get(s.id)
        if s.ended:
            return self._ended(s)
        if handle is not None:
            handle.step = s.current_step
            handle.confirmed = handle.confirmed or s.process_attempt >= handle.expected_attempt
            if s.live_status == PAUSED and not handle.process.paused:
                handle.process.pause()
                handle.paused_at = time.monotonic()
            elif s.live_status != PAUSED and handle.process.paused:
                handle.process.resume()
                # Time spent stopped does not count toward the first-tool window.
                handle.started_seen_at += time.monotonic() - handle.paused_at
            dead = handle.process.finished and handle.exit_tick >= 0
            if s.live_status == READY and (handle.confirmed or dead or self._workspace_changed(s)):
                # Restarted by a verb or a policy: a new process, same worktree (its work kept first).
                restarted = self._forget(s.id, f"restart: {s.last_restart_reason or 'verb'}")
                return restarted + self._launch(run, s)
        if handle is None:
            if s.live_status == READY:
                return self._launch(run, s)
            if s.live_status in (WAITING_FIRST_TOOL, WORKING):
                return [self._exited_block(s, None, "no agent process runs for this session on this machine")]
            return []
        if s.live_status == PAUSED:
            return []  # what it wrote before it was stopped is read when it resumes
        # Whether it had exited before its lines are taken: then every line it wrote is in.
        finished = handle.process.finished
        steps = self._name_heads(run, self._drain(run, s, handle))
        if s.switch_pending and s.live_status in (WORKING, WAITING_FIRST_TOOL):
            # The takeover handoff is recorded: end this process, start the new assignment.
            steps.append(ports.RestartProcess(agent_id=s.agent_id, reason="process_switch"))
            return steps
        return steps + self._watch(s, handle, tick, finished)

    def _ended(self, s: Any, final: bool = False) -> list[ports.Step]:
        """A stopped session's process is terminated; a completed one may exit by itself
        (within the stop grace), and how it exited is logged."""
        handle = self.handles.get(s.id)
        if handle is None:
            self.pool.cancel(s.id)
            return []
        process = handle.process
        handle.step = s.current_step
        why = f"session {s.live_status}"
        if process.finished:
            kept = self._forget(s.id, why)
            if handle.exit_tick >= 0 or process.stopping:
                return kept
            code = process.exit_code
            text = f"process {process.pid} exited with code {code} after the session ended"
            return [self._log(s.agent_id, "error" if code else "info", text, "exit")] + kept
        handle.ended_at = handle.ended_at or time.monotonic()
        if final or s.live_status == STOPPED or time.monotonic() - handle.ended_at > self.config.stop_grace_seconds:
            return self._forget(s.id, why)
        return []

    def _workspace_changed(self, s: Any) -> bool:
        mark = self.marks.get(s.id)
        return mark is not None and mark != (s.workspace_restarts, s.workspace_generation)

    def _launch(self, run: Any, s: Any) -> list[ports.Step]:
        key = s.id
        kept: list[ports.Step] = []
        retiring = self.retiring.get(key)
        if retiring is not None:
            if not retiring.process.finished:
                return []  # never two processes of one agent in one worktree
            del self.retiring[key]
            kept = self._keep_work(retiring, "before the next process in this worktree")
        if not self.pool.admit(key):
            if key in self._queued_logged:
                return []
            self._queued_logged.add(key)
            ahead = self.pool.position(key)
            return [self._log(s.agent_id, "info", f"waiting for a process slot ({ahead} ahead; "
                              f"at most {self.pool.max_processes} agent processes run at once)", "stdout")]
        self._queued_logged.discard(key)
        workspace_name = f"wt-{run.run_id}-{s.agent_id}" + (f"-g{s.workspace_generation}" if s.workspace_generation else "")
        author = agent_identity(self.config, s.role_key)
        try:
            if self._workspace_changed(s):
                worktree = self.worktrees.recreate(run, s.agent_id, author, (
                    f"squadops: work {s.agent_id} left uncommitted (before a fresh workspace)\n\n"
                    f"Run: {run.run_id}\nSession: {s.session_id}\nStep: {s.current_step}\n"))
            else:
                worktree = self.worktrees.ensure(run, s.agent_id)
        except (WorktreeError, OSError) as exc:
            self.pool.cancel(key)
            return kept + [ports.Block(
                agent_id=s.agent_id, code=SOURCE_MATERIALIZATION_FAILED,
                message=f"The session's git worktree could not be created: {excerpt(str(exc), 400)}",
                evidence={"workspace_name": workspace_name, "error": excerpt(str(exc), 400)},
            )]
        self.marks[key] = (s.workspace_restarts, s.workspace_generation)
        self.workspaces[workspace_name] = worktree
        identity = agent_tokens.AgentIdentity(run.tenant, run.run_id, s.session_id, s.agent_id)
        argv: list[str] = []
        sockets = Forwarder.folder() if self.config.sandbox.enabled else None
        try:
            launch = prepare(self.config, run, s, worktree, agent_tokens.sign(self.config.token_key, identity), brief(run, s),
                             git_dirs=self.worktrees.git_dirs(worktree), sockets=sockets,
                             lent_objects=self.worktrees.lent_objects(worktree))
            argv = list(launch.sandbox.command) if launch.sandbox else launch.argv
            process = AgentProcess(launch, self.forwarder)
        except SandboxUnavailable as exc:
            self.pool.cancel(key)
            self.forwarder.close(sockets)
            return kept + [sandbox_steps.unavailable_block(s.agent_id, self.config.sandbox.kind, str(exc))]
        except MissingCommand as exc:
            self.pool.cancel(key)
            self.forwarder.close(sockets)
            return kept + [self._missing(s, str(exc))]
        except OSError as exc:  # no such binary, not executable, ...
            self.pool.cancel(key)
            self.forwarder.close(sockets)
            program = argv[0] if argv else "the agent CLI"
            return kept + [self._missing(s, f"The agent CLI {program!r} cannot be run ({exc.strerror or exc}); install it "
                                     "or set SQUADOPS_LOCAL_AGENT_COMMAND.")]
        self.pool.started(key, process)
        self.handles[key] = Handle(
            key=key, tenant=run.tenant, run_id=run.run_id, agent_id=s.agent_id, process=process,
            workspace_name=workspace_name, expected_attempt=s.process_attempt + 1,
            translator=StepTranslator(s.agent_id), session_id=s.session_id, worktree=worktree, author=author,
            step=s.current_step, confinement=launch.confinement,
        )
        steps: list[ports.Step] = kept + [self._log(
            s.agent_id, "info",
            f"process {process.pid} started in {worktree}{' (sandbox: bwrap)' if launch.sandbox else ''}: "
            f"{excerpt(shlex.join(argv), 300)}", "stdout",
        )]
        if s.mailbox:
            steps.append(ports.ControllerAction(agent_id=s.agent_id, action="agent_mailbox",
                                                summary="the mailbox went into the process's brief"))
        return steps

    def _drain(self, run: Any, s: Any, handle: Handle, reoffer: bool = True) -> list[ports.Step]:
        steps: list[ports.Step] = []
        logs = 0
        translator = handle.translator or StepTranslator(s.agent_id)
        for line in handle.process.take_lines():
            for signal in handle.reader.read(line):
                if isinstance(signal, Started):
                    handle.llm_session_id = signal.llm_session_id
                    handle.started_seen_at = time.monotonic()
                    # The model the CLI says it runs; else the one the plane gave its command line.
                    configured = "" if self.config.command else str((s.process or {}).get("model", ""))
                    model_ran = signal.model or configured
                    steps.append(ports.StartProcess(
                        agent_id=s.agent_id, llm_session_id=signal.llm_session_id, workspace_name=handle.workspace_name,
                        model_ran=model_ran,
                    ))
                    model = f" (model {model_ran})" if model_ran else ""
                    steps.append(self._log(s.agent_id, "info", f"llm session {signal.llm_session_id} opened{model}", "stdout"))
                    continue
                for step in translator.steps(signal, run, s):
                    if isinstance(step, ports.RunnerOutput):
                        logs += 1
                        if logs > LOGS_PER_TICK:
                            continue
                    steps.append(step)
        if logs > LOGS_PER_TICK:
            steps.append(self._log(s.agent_id, "warn", f"{logs - LOGS_PER_TICK} more runner log lines not shown", "stdout"))
        errors = handle.process.take_errors()
        if errors:
            steps.append(self._log(s.agent_id, "warn", excerpt(" | ".join(errors[-5:]), 500), "stderr"))
        if (
            reoffer and s.live_status == READY and handle.llm_session_id and not handle.confirmed
            and not any(isinstance(step, ports.StartProcess) for step in steps)
        ):
            # Its start was refused while the session was busy (paused, say): offer it again.
            steps.insert(0, ports.StartProcess(
                agent_id=s.agent_id, llm_session_id=handle.llm_session_id, workspace_name=handle.workspace_name,
                model_ran=handle.reader.model or ("" if self.config.command else str((s.process or {}).get("model", ""))),
            ))
        return steps

    def _watch(self, s: Any, handle: Handle, tick: int, finished: bool) -> list[ports.Step]:
        process, steps = handle.process, []
        translator = handle.translator
        first_tool = translator is not None and translator.first_tool_seen
        # A call awaiting its result may still be the first tool: no block while it runs (for
        # one more window: a call that never answers is a stall too).
        in_flight = translator is not None and translator.in_flight and not finished
        window = self.config.first_tool_seconds * (2 if in_flight else 1)
        # A result that put up the permission wall says what stopped the run itself.
        walled = translator is not None and translator.walled
        if s.live_status == WAITING_FIRST_TOOL and handle.confirmed and not (first_tool or walled):
            waited = time.monotonic() - handle.started_seen_at
            if waited >= window or finished:
                awaited = translator.oldest_in_flight if in_flight and translator is not None else ""
                steps.append(walls.first_tool_block(s, handle.llm_session_id, process, waited=waited, window=window,
                                                    finished=finished, awaited_call=awaited))
        if not finished:
            return steps
        if handle.exit_tick < 0:
            handle.exit_tick = tick
            code = process.exit_code
            if process.stopping:
                steps.append(self._log(s.agent_id, "info", f"process {process.pid} ended by the plane (exit {code})", "exit"))
            elif code:
                tail = process.stderr_tail()
                steps.append(self._log(
                    s.agent_id, "error",
                    f"process {process.pid} exited with code {code}" + (f"; stderr: {excerpt(tail, 400)}" if tail else ""),
                    "exit",
                ))
            else:
                steps.append(self._log(s.agent_id, "info", f"process {process.pid} exited (code 0)", "exit"))
            if s.live_status == READY and not handle.llm_session_id:
                steps.append(self._exited_block(s, handle, "it exited before it opened its LLM session"))
        elif tick > handle.exit_tick and s.live_status == WORKING and not process.stopping:
            # The result it wrote (if any) was applied last tick: still working means none came.
            steps.append(self._exited_block(s, handle, "it ended without reporting a result"))
        return steps

    # -- helpers ----------------------------------------------------------------------------

    def _exited_block(self, s: Any, handle: Handle | None, why: str) -> ports.Block:
        return walls.exited_block(s, handle.process if handle else None, why)

    def _missing(self, s: Any, message: str) -> ports.Step:
        return walls.missing_cli(self.config, s, message)

    def _forget(self, key: str, why: str = "") -> list[ports.Step]:
        """Ends the session's process; once it has exited, what it left uncommitted in its
        worktree is committed onto its branch (now, or when the retiring process exits)."""
        handle = self.handles.pop(key, None)
        self.pool.cancel(key)
        self._queued_logged.discard(key)
        if handle is None:
            return []
        handle.process.stop(self.config.stop_grace_seconds)
        if not handle.process.finished:
            self.retiring[key] = handle
            return []
        return self._keep_work(handle, why)

    def _keep_work(self, handle: Handle, why: str) -> list[ports.Step]:
        if handle.worktree is None:
            return []
        return work.keep(self.worktrees, handle.worktree, work.Author(
            handle.agent_id, handle.author, handle.run_id, handle.session_id, handle.step), why)

    def _name_heads(self, run: Any, steps: list[ports.Step]) -> list[ports.Step]:
        # Each process start also says how the process is confined.
        confinements = {h.agent_id: h.confinement for h in self.handles.values()
                        if (h.tenant, h.run_id) == (run.tenant, run.run_id)}
        return sandbox_steps.confined(work.name_heads(self.worktrees, run, steps), confinements)

    def _settle_retiring(self, run: Any) -> list[ports.Step]:
        """The run's retired processes that have exited get their work committed."""
        steps: list[ports.Step] = []
        for key, handle in list(self.retiring.items()):
            if (handle.tenant, handle.run_id) == (run.tenant, run.run_id) and handle.process.finished:
                del self.retiring[key]
                steps += self._keep_work(handle, "process ended by the plane")
        return steps

    @staticmethod
    def _log(agent_id: str, level: str, text: str, stream: str) -> ports.RunnerOutput:
        return ports.RunnerOutput(agent_id=agent_id, stream=stream, level=level, text=text)
