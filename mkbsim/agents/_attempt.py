"""One attempt by a real model: the terminal-agent loop, its budgets, and its events.

A turn: the model replies (one JSON object, see ``_reply``, asked for in the agent's reply format);
its files are written, its commands run in the sandbox, ``submit`` sends kernel.py to the scorer; the
outputs, the verifier's feedback and what is left of the budget come back as the next message. The
attempt ends when the model says ``done``, when its wall-clock time is used up, or after too many
unusable replies in a row; then SKILL.md is captured and the final kernel.py is verified
(``submission: "final"``).

Time: the budget is real wall-clock time from the start of the attempt, less the time lost to
provider faults (failed requests and backoff sleeps), which is recorded as ``infra_stall_s``:
a rate-limit storm must not eat one arm's minutes and not the other's.

Failures: a model that cannot be reached after retries, or a final verification that fails on
the verifier's side, ends the attempt as ``infra_error`` (a resume runs it again); everything the
agent does wrong is scored as it stands.

Stopping: Ctrl-C in the attempt's thread, or ``stop`` set by a campaign running attempts in worker
threads (where signals do not arrive), ends it as ``interrupted``. ``stop`` is checked between
turns, before and after every model request, while a request or a retry's wait is under way (the
request is abandoned) and while a command runs (which is killed).

Reply formats: the attempt asks in the first of the agent's candidate formats (``ModelConfig.reply_formats``);
where the provider refuses a structured request and another candidate is left (``auto``), it records
the refusal (``reply_format_fallback``) and asks again in the next one for the rest of the attempt.
``AttemptStarted.agent.reply_format`` holds the candidates and why; every turn's ``llm`` step the format it
was asked in. Summaries are always asked as text.

Secrets (DESIGN §4): every event of the attempt passes a ``Redactor`` before it is stored, and every
text sent to the model is redacted first (``_secrets``); the same gate makes the agent's text encodable
(a lone surrogate becomes U+FFFD), and a command no program can take (a NUL byte) is refused as an
observation: what the agent writes cannot end its attempt as ``infra_error``. A model reply is stored and
sent back at most ``max_reply_chars`` long.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import socket
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mkbsim.agents._conversation import SUMMARY_HEADING, Conversation
from mkbsim.agents._ledger import CostLedger
from mkbsim.agents._model import (
    BudgetEnded,
    Completion,
    ContextOverflow,
    FormatRefused,
    ModelClient,
    ModelConfig,
    ModelUnavailable,
    RetryNote,
    describe_error,
)
from mkbsim.agents._record import AttemptRecorder
from mkbsim.agents._reply import Reply, ReplyError, corrective_message, parse_reply, reply_instructions
from mkbsim.agents._sandbox import Sandbox, SandboxConfig
from mkbsim.agents._scoring import Scorer, SubmissionIndex, Unscorable, Verdict
from mkbsim.agents._secrets import RedactingLog, Redactor, without_credentials
from mkbsim.campaigns._attempt import AttemptOutcome
from mkbsim.campaigns._signals import StopFlag
from mkbsim.catalog import DSLS, Budget, Problem, render_task
from mkbsim.events import (
    AttemptFinished,
    AttemptStarted,
    EventLog,
    SkillRead,
    SkillWritten,
    StoreError,
    SubmissionMade,
    VerifierResult,
    validate,
)
from mkbsim.events._types import Arm, AttemptStatus, Dsl

_SYSTEM = """\
You are a GPU kernel engineer working on one optimization task in a sandbox: a Linux working
directory where you write files and run shell commands, one turn at a time. There is no GPU and no
network here; the verifier runs your kernel on its GPU when you submit.

"""

_CUT_OFF_HINT = " Your reply hit the output token limit and was cut off: keep replies shorter (one file per turn)."

#: Final verification is retried this often when the verifier itself fails.
_FINAL_TRIES = 3


@dataclass(frozen=True)
class LoopConfig:
    """How the loop treats the conversation.

    ``summarize_at``: fraction of the context window at which early turns are summarized.
    ``keep_recent_messages``: messages kept verbatim after a summary. ``max_malformed_replies``:
    unusable replies in a row that end the attempt (an agent failure, scored). ``max_reply_chars``: a
    model reply is stored and sent back only up to this many characters (the rest is cut, and the cut
    recorded in its step as ``truncated_from_chars``).
    """

    summarize_at: float = 0.8
    keep_recent_messages: int = 6
    max_malformed_replies: int = 8
    max_reply_chars: int = 100_000


@dataclass(frozen=True)
class AttemptSpec:
    """Who attempts what: the fields of ``AttemptStarted``, plus the transferred skill of a
    treatment (already filtered) and the filter's name."""

    attempt_id: str
    campaign_id: str
    problem: Problem
    dsl: Dsl
    arm: Arm
    replicate: int = 0
    source_attempt_id: str | None = None
    skill: str | None = None
    filter: str | None = None
    chain_id: str | None = None
    hop: int | None = None
    #: fields a campaign adds to ``AttemptStarted`` and ``SkillRead`` (a control arm's, ``AttemptTask.read_fields``)
    extra: Mapping[str, Any] = field(default_factory=dict)


class BudgetClock:
    """Wall-clock budget of one attempt, less time lost to provider faults."""

    def __init__(self, minutes: float) -> None:
        self.limit_s = minutes * 60.0
        self.start = time.monotonic()
        self.stalled_s = 0.0

    def add_stall(self, seconds: float) -> None:
        self.stalled_s += seconds

    def left_s(self) -> float:
        return self.limit_s - (time.monotonic() - self.start - self.stalled_s)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def public_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Model parameters as recorded in events: every credential replaced by ``[REDACTED]``."""
    out: dict[str, Any] = without_credentials(params)
    return out


class _AttemptRun:
    def __init__(
        self,
        store: EventLog,
        spec: AttemptSpec,
        model: ModelConfig,
        scorer: Scorer,
        sandbox_config: SandboxConfig,
        budget: Budget,
        loop: LoopConfig,
        ledger: CostLedger,
        client: ModelClient,
        stop: StopFlag | None = None,
    ) -> None:
        self.spec, self.model, self.scorer, self.budget, self.loop = spec, model, scorer, budget, loop
        self.ledger, self.client, self.stop = ledger, client, stop
        # everything stored passes the redactor; what is sent to the model is built from the same texts
        self.redactor = Redactor.for_agent(model, sandbox_config.secret_env)
        self.rec = AttemptRecorder(RedactingLog(store, self.redactor), spec.attempt_id)
        self.sandbox = Sandbox.create(sandbox_config, spec.attempt_id, spec.dsl)
        self.snapshots = sandbox_config.root / f"{spec.attempt_id}.submissions"
        shutil.rmtree(self.snapshots, ignore_errors=True)  # a retried attempt starts from scratch
        self.conv = Conversation()
        self.window = model.context_window()  # imports litellm (seconds): before the clock starts
        self.formats = model.reply_formats()
        self.reply_format = self.formats.candidates[0]
        self.untried_formats = list(self.formats.candidates[1:])
        self.clock = BudgetClock(budget.minutes)
        self.submissions = 0
        self.counted = 0
        self.tokens = 0
        self.cost = 0.0
        self.task_text = ""

    # -- events ---------------------------------------------------------------------------------

    def _say(self, role: str, content: str) -> None:
        """Record a message to the model and add it to the conversation."""
        content = self.redactor.text(content)
        self._apply(self.rec.step("observation", content, role=role), "observation", content, role=role)

    def _apply(self, step: int, kind: str, content: str, **extra: Any) -> None:
        self.conv.apply({"kind": kind, "step": step, "content": content, **extra})

    def _charge(self, completion: Completion) -> None:
        self.ledger.charge(completion.cost_usd, completion.tokens)
        self.tokens += completion.tokens or 0
        self.cost += completion.cost_usd or 0.0

    def _on_retry(self, note: RetryNote) -> None:
        self.clock.add_stall(note.request_s + note.sleep_s)
        self.rec.step(
            "note", f"model call failed (try {note.attempt}): {note.error}; retrying in {note.sleep_s:.1f} s",
            event="model_retry", request_s=round(note.request_s, 3), sleep_s=round(note.sleep_s, 3),
        )  # fmt: skip

    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def check_stop(self) -> None:
        """End the attempt as interrupted if its campaign is stopping."""
        if self.stopped():
            raise KeyboardInterrupt("stopped")

    def _time_left(self) -> float:
        self.check_stop()  # asked before every model request, retries included
        return self.clock.left_s()

    def _budget_line(self) -> str:
        left = max(self.clock.left_s(), 0.0) / 60
        return (
            f"[Time left: {left:.1f} min. Counted submissions left: "
            f"{self.budget.submissions - self.counted} of {self.budget.submissions}.]"
        )

    # -- the loop -------------------------------------------------------------------------------

    def start(self) -> None:
        s = self.spec
        started = AttemptStarted(
            attempt_id=s.attempt_id, campaign_id=s.campaign_id, model=self.model.label, problem=s.problem.id,
            family=s.problem.family, dsl=s.dsl, arm=s.arm, replicate=s.replicate,
            budget={"minutes": self.budget.minutes, "submissions": self.budget.submissions},
            source_attempt_id=s.source_attempt_id, chain_id=s.chain_id, hop=s.hop, filter=s.filter,
        ).to_dict()  # fmt: skip
        price = self.model.price_per_mtok
        agent = {
            "kind": "llm", "model": self.model.model, "params": public_params(self.model.params),
            "context_tokens": self.window, "litellm": importlib.metadata.version("litellm"),
            "reply_format": {"configured": self.model.reply_format, "candidates": list(self.formats.candidates),
                             "reason": self.formats.reason},
            "price_per_mtok": {"input": price[0], "output": price[1]} if price else None,
        }  # fmt: skip
        # where the loop runs: on a Ray cluster, the node and worker process (a try whose worker died has no end)
        runner = {"host": socket.gethostname(), "pid": os.getpid()}
        self.rec.append((AttemptStarted.TYPE, {**started, **s.extra, "agent": agent, "sandbox": self.sandbox.facts(),
                                               "runner": runner}))  # fmt: skip
        if s.skill is not None:
            assert s.source_attempt_id is not None, "a transferred skill needs its source attempt"
            read = SkillRead(attempt_id=s.attempt_id, source_attempt_id=s.source_attempt_id, text=s.skill,
                             sha256=sha256_text(s.skill), filter=s.filter)  # fmt: skip
            self.rec.append((SkillRead.TYPE, {**read.to_dict(), **s.extra}))
        if not self.sandbox.isolation.isolated:
            self.rec.step("note", f"sandbox NOT isolated: {self.sandbox.isolation.detail}", event="sandbox_isolation")
        cfg = self.sandbox.config
        self._say("system", _SYSTEM + reply_instructions(cfg.default_command_timeout_s, cfg.max_command_timeout_s))
        docs = DSLS[s.dsl].docs_index
        self.task_text = (
            render_task(s.problem, s.dsl, self.budget, skill=s.skill)
            + f"\n\n## Sandbox\nYour working directory holds `kernel.py` (a placeholder), `SKILL.md` (empty) "
            f"and `{docs}`. Its `python` has PyTorch and {DSLS[s.dsl].title} installed."
        )
        self._say("user", f"{self.task_text}\n\n{self._budget_line()}")

    def loop_turns(self) -> str:
        """Run turns until the attempt ends; returns why it ended."""
        malformed = 0
        while True:
            self.check_stop()
            if self.clock.left_s() <= 0:
                return "time budget used up"
            self._maybe_summarize()
            prompt_chars = self.conv.chars()
            try:
                completion = self._ask()
            except ContextOverflow:
                if not self._summarize():  # our estimate was off: summarize now and ask again
                    raise
                prompt_chars = self.conv.chars()
                completion = self._ask()
            self.conv.calibrate(completion.prompt_tokens, prompt_chars)
            step = self.rec.step(
                "llm", completion.text, tokens=completion.tokens, cost_usd=completion.cost_usd, purpose="turn",
                reply_format=self.reply_format, prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens, finish_reason=completion.finish_reason,
                latency_s=round(completion.latency_s, 3), response_model=completion.response_model,
                **completion.truncation(),
            )  # fmt: skip
            self._apply(step, "llm", completion.text, purpose="turn")
            cut = (f" Your reply had {completion.truncated_from_chars} characters; only the first "
                   f"{len(completion.text)} were kept.") if completion.truncated_from_chars else ""  # fmt: skip
            try:
                reply = parse_reply(completion.text)
            except ReplyError as exc:
                malformed += 1
                if malformed >= self.loop.max_malformed_replies:
                    return f"{malformed} unusable replies in a row"
                hint = _CUT_OFF_HINT if completion.finish_reason == "length" else ""
                self._say("user", f"{corrective_message(exc)}{hint}{cut}\n\n{self._budget_line()}")
                continue
            malformed = 0
            parts = self._act(reply)
            if cut:
                parts.append(cut.strip())
            if reply.done:
                return "the agent declared it done"
            if self.clock.left_s() <= 0:
                return "time budget used up"
            if not reply.has_action:
                parts.append("No action in your reply: nothing was run.")
            self._say("user", "\n\n".join([*parts, self._budget_line()]))

    def _ask(self) -> Completion:
        """The model's next turn, asked in the current reply format; a refused format gives way to the next
        candidate (recorded), the last one's refusal ends the attempt (``FormatRefused``)."""
        while True:
            try:
                return self._complete(self.conv.messages(), self.reply_format)
            except FormatRefused as exc:
                if not self.untried_formats:
                    raise
                refused, self.reply_format = self.reply_format, self.untried_formats.pop(0)
                self.rec.step(
                    "note", f"the provider refused the {refused} reply format ({exc}); asking in "
                    f"{self.reply_format} from now on", event="reply_format_fallback", refused=refused,
                    reply_format=self.reply_format,
                )  # fmt: skip

    def _complete(self, messages: list[dict[str, str]], reply_format: str = "text") -> Completion:
        """The model's reply, its text redacted and capped at ``max_reply_chars`` (what is stored and sent back)."""
        completion = self.client.complete(
            messages, time_left=self._time_left, on_retry=self._on_retry, stopped=self.stopped,
            reply_format=reply_format,
        )  # fmt: skip
        self.check_stop()
        self._charge(completion)
        return completion.capped(self.loop.max_reply_chars, self.redactor.text)

    def _maybe_summarize(self) -> None:
        # room for the reply: its max_tokens, but never most of a small window
        reserve = min(int(self.model.params.get("max_tokens") or 4096), self.window // 4)
        if self.conv.estimated_tokens() + reserve > self.loop.summarize_at * self.window:
            self._summarize()

    def _summarize(self) -> bool:
        """Replace early turns by a model-written summary; False if there is nothing to summarize."""
        found = self.conv.summarizable(self.loop.keep_recent_messages)
        if found is None:
            return False
        middle, kept_from = found
        max_chars = int(0.5 * self.window / self.conv.tokens_per_char)
        request = self.conv.summary_request(middle, max_chars)
        completion = self._complete(request)
        self.rec.step(
            "llm", completion.text, tokens=completion.tokens, cost_usd=completion.cost_usd, purpose="summary",
            request=request, prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
            latency_s=round(completion.latency_s, 3), **completion.truncation(),
        )  # fmt: skip
        first = self.task_text + SUMMARY_HEADING + completion.text.strip()
        replaced = f"{middle[0][0]}-{middle[-1][0]}"
        step = self.rec.step("note", first, event="context_summarized", kept_from_step=kept_from, replaced=replaced)
        self._apply(step, "note", first, event="context_summarized", kept_from_step=kept_from)
        return True

    # -- actions --------------------------------------------------------------------------------

    def _act(self, reply: Reply) -> list[str]:
        parts: list[str] = []
        for path, content in reply.write.items():
            try:
                self.sandbox.write_text(path, content)
                result = f"wrote {path} ({len(content)} characters)"
            except (ValueError, OSError) as exc:
                result = f"could not write {path}: {exc}"
            self.rec.step("command", content, action="write", path=path, result=result)
            parts.append(f"[write] {result}")
        for command in reply.commands:
            if self.clock.left_s() <= 0:
                parts.append(f"$ {command.cmd}\n(not run: the time budget is used up)")
                break
            timeout = min(command.timeout_s or self.sandbox.config.default_command_timeout_s, self.clock.left_s())
            self.check_stop()
            try:
                r = self.sandbox.run(command.cmd, max(timeout, 1.0), stop=self.stop)
            except ValueError as exc:  # the agent's own text: told, not an infrastructure failure
                self.rec.step("command", command.cmd, action="run", exit_code=None, refused=str(exc))
                parts.append(f"$ {command.cmd}\n(not run: {exc})")
                continue
            quota: dict[str, Any] = {"over_quota": r.over_quota} if r.over_quota else {}
            if r.over_memory:
                quota["over_memory"] = r.over_memory
            self.rec.step(
                "command", command.cmd, action="run", exit_code=r.exit_code, timed_out=r.timed_out,
                duration_s=round(r.duration_s, 3), output=r.output, output_bytes=r.output_bytes, **quota,
            )  # fmt: skip
            parts.append(f"$ {command.cmd}\n{r.output.rstrip()}\n[{r.status()}, {r.duration_s:.1f} s]")
        if reply.submit:
            parts.append(self._submit())
        return parts

    def _snapshot(self, code: str, name: str) -> Path:
        """The submitted code, frozen outside the sandbox: what is verified is what is recorded."""
        path = self.snapshots / name / "kernel.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
        return path

    def _score(self, code: str, index: SubmissionIndex) -> Verdict | str:
        """The verdict, or why the verifier itself failed (an exception, or a payload that is not
        a valid ``VerifierResult``: a verifier bug must not be blamed on the agent)."""
        try:
            path = self._snapshot(code, str(index))
            verdict = self.scorer.score(path, attempt_id=self.spec.attempt_id, submission=index)
            validate(VerifierResult.TYPE, verdict.payload)
        except Exception as exc:  # the verifier's own failure is infrastructure, not the agent's
            return describe_error(exc)
        return verdict

    def _submit(self) -> str:
        if self.counted >= self.budget.submissions:
            self.rec.step("note", "submit refused: no counted submissions left", event="submit_refused")
            return (
                f"[submit] Refused: all {self.budget.submissions} counted submissions are used. Your final "
                "kernel.py is still verified when the attempt ends."
            )
        self.submissions += 1
        index = self.submissions
        code = self.sandbox.read_text("kernel.py") or ""
        made = {"attempt_id": self.spec.attempt_id, "submission": index, "code_sha256": sha256_text(code), "code": code}
        problem = _unparsable(code)
        if problem is not None:
            self.rec.append((SubmissionMade.TYPE, {**made, "counted": False, "reason": problem}))
            return f"[submit] Submission {index} not counted: {problem}. {self._left()}"
        verdict = self._score(code, index)
        if isinstance(verdict, str) or verdict.infra_error:
            reason = f"verifier failure: {verdict if isinstance(verdict, str) else verdict.feedback}"
            payloads: list[tuple[str, dict[str, Any]]] = [
                (SubmissionMade.TYPE, {**made, "counted": False, "reason": reason})
            ]
            if isinstance(verdict, Verdict):
                payloads.append((VerifierResult.TYPE, verdict.payload))
            self.rec.append(*payloads)
            return f"[submit] Submission {index} not counted: the verifier failed ({reason}). {self._left()}"
        self.counted += 1
        self.rec.append((SubmissionMade.TYPE, {**made, "counted": True}), (VerifierResult.TYPE, verdict.payload))
        return f"[submit] Submission {index} (counted, {self._left()}):\n{verdict.feedback}"

    def _left(self) -> str:
        return f"{self.budget.submissions - self.counted} of {self.budget.submissions} counted submissions left"

    # -- the end --------------------------------------------------------------------------------

    def capture_skill(self) -> str | None:
        text = self.sandbox.read_text("SKILL.md")
        if text is None or not text.strip():
            self.rec.step("note", "SKILL.md is missing or empty at the end", event="no_skill")
            return None
        self.rec.append(SkillWritten(attempt_id=self.spec.attempt_id, text=text, sha256=sha256_text(text)))
        return text

    def verify_final(self) -> Verdict | str:
        """The verdict on the final kernel.py, or why the agent has no verifiable kernel
        (``str``; raises ``_FinalInfraError`` when the verifier keeps failing)."""
        code = self.sandbox.read_text("kernel.py") or ""
        problem = _unparsable(code)
        if problem is not None:
            self.rec.step("note", f"final kernel.py not verified: {problem}", event="final_unverifiable", code=code)
            return problem
        failure = ""
        for _ in range(_FINAL_TRIES):
            verdict = self._score(code, "final")
            if isinstance(verdict, Verdict) and not verdict.infra_error:
                payload = {**verdict.payload, "code_sha256": sha256_text(code), "code": code}
                self.rec.append((VerifierResult.TYPE, payload))
                return verdict
            failure = verdict if isinstance(verdict, str) else verdict.feedback
            self.rec.step("note", f"final verification failed on the verifier's side: {failure}", event="final_retry")
        raise _FinalInfraError(f"final verification failed {_FINAL_TRIES} times: {failure}")

    def finish(self, status: AttemptStatus, reason: str, verdict: Verdict | None, skill: str | None) -> AttemptOutcome:
        p = verdict.payload if verdict else {}
        passed = bool(p.get("passed")) and status == "finished"
        finished = AttemptFinished(
            attempt_id=self.spec.attempt_id, status=status, passed=passed,
            runtime_ms=p.get("runtime_ms") if passed else None, speedup=p.get("speedup") if passed else None,
            skipped=False, reason=reason,
        ).to_dict()  # fmt: skip
        extra = {
            "counted_submissions": self.counted, "tokens": self.tokens, "cost_usd": round(self.cost, 6),
            "infra_stall_s": round(self.clock.stalled_s, 3), "network_isolated": self.sandbox.isolation.isolated,
        }  # fmt: skip
        self.rec.append((AttemptFinished.TYPE, {**finished, **extra}))
        return AttemptOutcome(
            attempt_id=self.spec.attempt_id, status=status, passed=passed, runtime_ms=finished["runtime_ms"],
            speedup=finished["speedup"], skipped=False, reason=reason, skill=skill, counted_submissions=self.counted,
            tokens=self.tokens, cost_usd=self.cost, network_isolated=self.sandbox.isolation.isolated,
            network_detail=self.sandbox.isolation.detail, infra_stall_s=self.clock.stalled_s,
        )  # fmt: skip


class _FinalInfraError(Exception):
    pass


def _unparsable(code: str) -> str | None:
    if not code.strip():
        return "kernel.py is missing or empty"
    # compiled, never ast.parse'd: attempts run in threads, and CPython (3.11 at least, gh-106905) keeps the
    # AST converter's depth per interpreter, so two threads building AST objects at once (one switched out
    # by a finaliser mid-build) fail with SystemError "AST constructor recursion depth mismatch"; compiling
    # to bytecode builds no AST objects, and rejects what an import would
    try:
        compile(code, "kernel.py", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"kernel.py does not parse: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes; nesting too deep to compile
        return f"kernel.py does not parse: {exc}"
    return None


def run_attempt(
    store: EventLog,
    spec: AttemptSpec,
    model: ModelConfig,
    scorer: Scorer,
    *,
    sandbox: SandboxConfig,
    budget: Budget | None = None,
    loop: LoopConfig | None = None,
    ledger: CostLedger | None = None,
    client_factory: Callable[[ModelConfig], ModelClient] = ModelClient,
    stop: StopFlag | None = None,
) -> AttemptOutcome:
    """Run one attempt to its end, appending its events to ``store``; returns its outcome.

    Provider and verifier failures end it as ``infra_error`` (an ``Unscorable`` scorer at once, before the
    model is asked); Ctrl-C, or ``stop`` being set, as ``interrupted`` (then ``KeyboardInterrupt`` is
    raised). Both leave the attempt to be run again under the same id.
    """
    run = _AttemptRun(
        store, spec, model, scorer, sandbox, budget or Budget(), loop or LoopConfig(), ledger or CostLedger(),
        client_factory(model), stop,
    )  # fmt: skip
    run.start()
    if isinstance(scorer, Unscorable):  # nothing the model does could be verified: it is not asked
        run.rec.step("note", scorer.reason, event="unscorable")
        return run.finish("infra_error", scorer.reason, None, None)
    try:
        try:
            reason = run.loop_turns()
        except BudgetEnded:
            reason = "time budget used up (waiting for the model)"
        run.check_stop()
        skill = run.capture_skill()
        verdict = run.verify_final()
    except (ModelUnavailable, ContextOverflow) as exc:
        run.rec.step("note", f"model unavailable: {exc}", event="infra_error")
        return run.finish("infra_error", f"model unavailable: {exc}", None, None)
    except _FinalInfraError as exc:
        return run.finish("infra_error", str(exc), None, None)
    except KeyboardInterrupt:
        run.finish("interrupted", "interrupted by the operator", None, None)
        raise
    except StoreError:
        raise  # the store itself failed (or another process runs this attempt): write nothing more
    except Exception as exc:  # a fault of ours must cost one attempt (retried on resume), not the campaign
        run.rec.step("note", traceback.format_exc(), event="internal_error")
        return run.finish("infra_error", f"internal error: {describe_error(exc)}", None, None)
    if isinstance(verdict, str):
        return run.finish("finished", f"{reason}; {verdict}", None, skill)
    return run.finish("finished", reason, verdict, skill)
