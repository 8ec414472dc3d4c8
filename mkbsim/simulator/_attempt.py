"""One simulated attempt (DESIGN §4): at most 10 counted submissions within a simulated 40 minutes.

The agent considers a few plans (search breadth, plus whatever a read skill added, minus what it
ruled out), estimates each plan's payoff and its own chance of getting it right, implements the most
attractive one, submits, observes, updates its beliefs, keeps the best passing kernel and tunes it,
until the budget runs out or the expected gain is not worth the effort. Then it writes its skill and
the final kernel is verified again; that verdict counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from mkbsim.campaigns._attempt import AttemptOutcome, AttemptTask
from mkbsim.catalog import SKILL_HEADER
from mkbsim.events import AttemptFinished, AttemptStarted, SkillRead, SkillWritten
from mkbsim.metrics import HELP_AT
from mkbsim.simulator._design import PLAN_KINDS, DesignSpace, KernelPlan
from mkbsim.simulator._phrasing import plan_phrase
from mkbsim.simulator._profiles import AgentProfile
from mkbsim.simulator._reader import Guidance, read_skill
from mkbsim.simulator._rng import Draws
from mkbsim.simulator._scoring import SPEEDUP_CAP, AnalyticVerdict, Implementation, choose_scorer
from mkbsim.simulator._trajectory import TrajectoryWriter, sha256
from mkbsim.simulator._writer import Conclusions, PlanRecord, write_skill

BUDGET_S = 40 * 60.0
MAX_SUBMISSIONS = 10
ORIENT_S = 150.0  # reading the task and the DSL's documentation index
VERIFY_S = 60.0  # a submission's round trip to the verifier
LOCAL_CHECK_S = 40.0  # importing kernel.py in the sandbox (the DSL compiles there)
RETRY_SHARE = 0.5  # a retry after a diagnosed failure costs this share of a first build
TUNE_S = 240.0
MAX_TUNES = 3
TUNE_GAIN = 0.3  # share of the remaining quality headroom one tuning pass recovers on average
TUNE_EASE = 1.5  # logit: a tuning pass on a working kernel is easier than a new plan
SKILL_WRITE_S = 90.0  # kept in reserve for SKILL.md
PASS_VALUE = 2.5  # log-units an agent without a passing kernel puts on getting one
BELIEF_SIGMA = 0.6  # spread of an agent's own estimate of a plan's log-speedup
CONSIDER_SIGMA = 0.7
QUALITY_SIGMA = 0.25
PESSIMISM = 0.6  # perceived logit lost per failure on a plan (the agent does not see its own learning)
MAX_LEARNING_FAILURES = 3
INSIGHT_FLOOR = 0.4  # share of a read strategy's benefit that even the weakest agent gets
BENCHMARK_MATCH = 0.9  # share of a read skill's reported speedup at which the reader considers it matched
ANCHOR_MARGIN = math.log(2.0)  # a vouched result within this log-factor of the agent's own hopes anchors it
MATCHED_SATISFICE = 0.3  # log-gain an agent that matched a reported result additionally wants before going on
FLAKE_RATE = 0.1  # scales the chance that a numerically marginal kernel fails the fresh final draws
MISSING_SKILL_IN_TIME = 0.3  # relative chance of an unkept SKILL.md when the attempt ended with time to spare
DSL_TITLES = {"cutedsl": "CuTe DSL", "tirx": "TIRx"}

# draw purposes (Draws keys); a treatment rerun reuses its original's seed, so the same plan and try
# meets the same luck and only the skill text differs
(_CONSIDER, _BELIEF, _TRY, _CAUSE, _QUALITY, _VERIFY, _LOCAL, _TUNE, _SLIP, _SKILL, _FALLBACK, _FLAKE, _READ,
 _WRITE, _PERSIST) = range(1, 16)  # fmt: skip


@dataclass
class _PlanLog:
    tries: int = 0
    failures: list[str] = field(default_factory=list)
    passed: bool = False
    best_speedup: float | None = None
    best_ms: float | None = None
    abandoned: bool = False


@dataclass(frozen=True)
class _Kept:
    impl: Implementation
    verdict: AnalyticVerdict


def simulate_attempt(task: AttemptTask, profile: AgentProfile, space: DesignSpace) -> AttemptOutcome:
    """Run one attempt of ``profile`` at ``space``'s problem; its outcome carries all its events
    (AttemptStarted … AttemptFinished) for the campaign's recorder."""
    traj = TrajectoryWriter(task.attempt_id)
    traj.add_raw(AttemptStarted.TYPE, task.started())
    return _Attempt(task, profile, space, traj).run()


class _Attempt:
    def __init__(self, task: AttemptTask, profile: AgentProfile, space: DesignSpace, traj: TrajectoryWriter) -> None:
        self.task = task
        self.spec = task.attempt
        self.p = profile
        self.space = space
        self.dsl = task.attempt.dsl
        self.draws = Draws(task.attempt.seed)
        self.traj = traj
        self.t = 0.0
        self.submissions = 0
        self.tunes = 0
        self.logs = {kind: _PlanLog() for kind in PLAN_KINDS}
        self.best: _Kept | None = None
        self.last: tuple[Implementation, AnalyticVerdict] | None = None
        self.guidance = Guidance()
        self.beliefs: dict[str, float] = {}
        self.considered: list[str] = []

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> AttemptOutcome:
        title = DSL_TITLES[self.dsl]
        self.t += ORIENT_S * 0.4
        self.traj.step("llm", f"Reading the task for {self.space.problem} ({title} variant) and the rules.", self.t)
        self.t += ORIENT_S * 0.6
        self.traj.step("command", f"less docs/{self.dsl}/INDEX.md", self.t)
        self.traj.step("observation", f"{title} documentation index: layouts, kernels, launch, examples.", self.t)
        if self.task.skill:
            self._read(SKILL_HEADER + self.task.skill)
        self._form_beliefs()
        stop = self._work()
        ran_out = stop == "time"
        self.traj.step("note", f"Stopping: {_STOP_NOTES[stop]}.", self.t)
        skill, labels = self._write_skill(satisfied=stop in ("satisfied", "capped", "matched"), ran_out=ran_out)
        final, verdict = self._final()
        if not self.spec.arm.startswith("solo_"):  # a treatment or a control arm: compared with its baseline
            self.traj.label("comparison", self._comparison_labels(final, verdict))
        self.traj.add(
            AttemptFinished(
                attempt_id=self.spec.attempt_id, status="finished", passed=verdict.passed,
                runtime_ms=verdict.runtime_ms, speedup=verdict.speedup, skipped=False,
                reason=None if verdict.passed else verdict.failure,
            )
        )  # fmt: skip
        return AttemptOutcome(
            self.spec.attempt_id, "finished", verdict.passed, verdict.runtime_ms, verdict.speedup, False,
            None if verdict.passed else verdict.failure, skill, labels, counted_submissions=self.submissions,
            events=tuple(self.traj.events),
        )  # fmt: skip

    def _read(self, text: str) -> None:
        g = self.guidance = read_skill(text, self.p, self.draws.child(_READ))
        self.traj.add(
            SkillRead(attempt_id=self.spec.attempt_id, source_attempt_id=self.task.source_attempt_id or "",
                      text=text, sha256=sha256(text), filter=self.spec.filter),
            **self.task.read_fields(),
        )  # fmt: skip
        self.t += g.reading_s
        self.traj.step("command", "less SKILL_FROM_PRIOR_ATTEMPT.md", self.t)
        for a in g.adoptions:
            effect = {"adopted": "adopting", "ignored": "not acting on", "reverified": "checking before use"}
            plans = f" [{', '.join(a.plans)}]" if a.plans else ""
            self.traj.step("note", f'Skill, {a.category}{plans}: {effect[a.decision]}: "{a.text}"', self.t)
        self.t += g.reverify_s

    def _form_beliefs(self) -> None:
        g, d = self.guidance, self.draws
        own: dict[str, float] = {}
        for plan in self.space.plans:
            own[plan.kind] = math.log(self.space.eager_ms / plan.runtime_ms(self.dsl, self.p.quality))
            own[plan.kind] += BELIEF_SIGMA * d.normal(_BELIEF, plan.index)
            self.beliefs[plan.kind] = g.belief.get(plan.kind, own[plan.kind]) + g.boost.get(plan.kind, 0.0)
        candidates = [p for p in self.space.plans if p.uses_dsl]
        # an agent enumerates the obvious plans first, and the ones it expects to be fast if it cares about speed
        candidates.sort(key=lambda p: -(p.salience + self.p.ambition * self.beliefs[p.kind]
                                        + CONSIDER_SIGMA * d.normal(_CONSIDER, p.index)))  # fmt: skip
        # a skill that vouches for a plan with a competitive result anchors the search on it: a close follower
        # explores little else, unless it checks claims for itself
        vouched = max((self.beliefs[k] for k in g.committed), default=-math.inf)
        competitive = vouched >= max(own[p.kind] for p in candidates) - ANCHOR_MARGIN
        anchoring = self.p.follow * (1.0 - self.p.reverify) if competitive else 0.0
        breadth = self.p.breadth * (1.0 - anchoring)
        n = int(breadth) + (d.uniform(_CONSIDER, 0) < breadth % 1)
        chosen = [p.kind for p in candidates[:n]] + sorted(g.considered - {p.kind for p in candidates[:n]})
        self.considered = [k for k in chosen if k not in g.pruned and k != "eager_only"]
        if not self.considered:  # a skill that rules out everything still leaves the most obvious plan
            self.considered = [next((p.kind for p in candidates if p.kind not in g.pruned), "minimal_dsl")]
        self.t += 30.0
        options = "; ".join(f"{k} (~{math.exp(self.beliefs[k]):.1f}x)" for k in self.considered)
        self.traj.step("llm", f"Options: {options}", self.t)

    def _work(self) -> str:
        while True:
            if self.submissions >= MAX_SUBMISSIONS:
                return "submissions"
            g = self.guidance
            reached = (self.best.verdict.speedup or 0.0) if self.best is not None else None
            if reached is not None and g.cap is not None and reached >= g.cap:
                return "capped"
            action = self._agenda_item() or self._best_option()
            if action is None:
                return "time" if self._remaining() < self._cheapest_cost() else "no_options"
            score, kind, plan = action
            if reached is not None:
                # a reported result anchors ambition: short of it the agent keeps going, past it it settles sooner
                threshold = self.p.satisfice
                if g.benchmark is not None:
                    matched = reached >= BENCHMARK_MATCH * g.benchmark
                    threshold = threshold + MATCHED_SATISFICE if matched else 0.0
                if score < threshold:
                    return "matched" if g.benchmark is not None and threshold > self.p.satisfice else "satisfied"
            if kind == "tune":
                self._tune(plan)
            else:
                self._implement(plan)

    def _remaining(self) -> float:
        return BUDGET_S - SKILL_WRITE_S - self.t

    def _cost(self, plan: KernelPlan) -> float:
        share = 1.0 if self.logs[plan.kind].tries == 0 else RETRY_SHARE
        return plan.build_s * self.p.speed * share + VERIFY_S

    def _cheapest_cost(self) -> float:
        return min(self._cost(self.space.plan(k)) for k in self.considered)

    def _logit(self, plan: KernelPlan) -> float:
        """The true log-odds that the next implementation try of ``plan`` is correct."""
        log = self.logs[plan.kind]
        g = self.guidance
        confusion = g.recipe_confusion if log.tries == 0 else 0.0
        # turning a described strategy into a working kernel takes skill: weak agents gain less from it
        insight = g.strategy.get(plan.kind, 0.0) * (INSIGHT_FLOOR + (1.0 - INSIGHT_FLOOR) * _sigmoid(self.p.skill))
        return (self.p.skill + getattr(self.p, self.dsl) - plan.difficulty[self.dsl] + insight
                + self.p.debugging * min(len(log.failures), MAX_LEARNING_FAILURES) - confusion)  # fmt: skip

    def _perceived(self, plan: KernelPlan, extra: float = 0.0) -> float:
        log = self.logs[plan.kind]
        learned = self.p.debugging * min(len(log.failures), MAX_LEARNING_FAILURES)
        x = (self._logit(plan) - learned + extra + self.p.overconfidence + self.guidance.confidence.get(plan.kind, 0.0)
             - PESSIMISM * len(log.failures))  # fmt: skip
        return _sigmoid(x)

    def _agenda_item(self) -> tuple[float, str, KernelPlan] | None:
        for kind in self.guidance.agenda:
            log = self.logs[kind]
            plan = self.space.plan(kind)
            if kind in self.considered and log.tries == 0 and self._cost(plan) <= self._remaining():
                return (math.inf, "implement", plan)
        return None

    def _best_option(self) -> tuple[float, str, KernelPlan] | None:
        # agents compare runtimes, which the speedup cap of the verifier does not flatten
        current = math.log(self.best.verdict.eager_ms / (self.best.verdict.runtime_ms or 1.0)) if self.best else None
        options: list[tuple[float, str, KernelPlan]] = []
        for kind in self.considered:
            log = self.logs[kind]
            plan = self.space.plan(kind)
            if log.abandoned or log.passed or self._cost(plan) > self._remaining():
                continue
            gain = self.p.ambition * (self.beliefs[kind] - (current or 0.0)) + (PASS_VALUE if current is None else 0.0)
            if gain > 0:
                options.append((self._perceived(plan) ** (1.0 + self.p.caution) * gain, "implement", plan))
        if self.best is not None and self.tunes < MAX_TUNES and self.best.impl.plan.kind != "minimal_dsl":
            plan, q = self.best.impl.plan, self.best.impl.quality
            if TUNE_S * self.p.speed + VERIFY_S <= self._remaining():
                gain = self.p.ambition * math.log(
                    plan.runtime_ms(self.dsl, q) / plan.runtime_ms(self.dsl, q + (1 - q) * TUNE_GAIN)
                )
                options.append((self._perceived(plan, TUNE_EASE) ** (1.0 + self.p.caution) * gain, "tune", plan))
        return max(options, key=lambda o: o[0]) if options else None

    # -- actions ------------------------------------------------------------------------------------

    def _implement(self, plan: KernelPlan) -> None:
        log = self.logs[plan.kind]
        i = log.tries
        self.t += self._cost(plan) - VERIFY_S
        log.tries += 1
        phrase = plan_phrase(plan.kind, plan.reformulation, i)
        verb = "Implementing" if i == 0 else "Fixing and retrying"
        self.traj.step("llm", f"{verb} {phrase} (expecting ~{math.exp(self.beliefs[plan.kind]):.1f}x).", self.t)
        self.traj.step("command", f"edit kernel.py  # {plan.kind}, try {i + 1}", self.t)
        d = self.draws
        correct = d.uniform(_TRY, plan.index, i) < _sigmoid(self._logit(plan))
        cause = None if correct else plan.failure_cause(self.dsl, d.uniform(_CAUSE, plan.index, i))
        self.t += LOCAL_CHECK_S
        self.traj.step("command", "python -c 'import kernel'", self.t)
        if cause == "compile_error" and d.uniform(_LOCAL, plan.index, i) < self.p.local_testing:
            self.traj.step("observation", "The DSL kernel failed to build; fixing before submitting.", self.t)
            self._failed(plan, cause)
            return
        self.traj.step("observation", "kernel.py imports and the DSL kernel builds.", self.t)
        own = self.p.quality * math.exp(QUALITY_SIGMA * d.normal(_QUALITY, plan.index, i))
        quality = min(1.0, max(0.2, own + self.guidance.craft.get(plan.kind, 0.0)))
        self._submit(Implementation(plan, correct, cause, quality), f"{plan.kind}, try {i + 1}")

    def _tune(self, plan: KernelPlan) -> None:
        assert self.best is not None
        i = self.tunes
        self.tunes += 1
        self.t += TUNE_S * self.p.speed
        self.traj.step("llm", f"Tuning the kept kernel (tiles, vector widths, launch shape), pass {i + 1}.", self.t)
        d = self.draws
        ok = d.uniform(_TUNE, i) < _sigmoid(self._logit(plan) + TUNE_EASE)
        q = self.best.impl.quality
        quality = min(1.0, q + (1.0 - q) * TUNE_GAIN * (0.5 + d.uniform(_TUNE, i, 1)))
        cause = None if ok else plan.failure_cause(self.dsl, d.uniform(_TUNE, i, 2))
        self.traj.step("command", f"edit kernel.py  # {plan.kind}, tuning pass {i + 1}", self.t)
        self._submit(Implementation(plan, ok, cause, quality), f"{plan.kind}, tuning pass {i + 1}")

    def _submit(self, impl: Implementation, label: str) -> None:
        self.submissions += 1
        n = self.submissions
        self.t += VERIFY_S
        phrase = plan_phrase(impl.plan.kind, impl.plan.reformulation, 0)
        code = f"# {self.space.problem} ({DSL_TITLES[self.dsl]}), submission {n}: {label}\n# plan: {phrase}\n"
        self.traj.submission(n, code)
        v = choose_scorer(self.space, impl.plan, self.dsl).verify(self.space, self.dsl, impl, self.draws, _VERIFY, n)
        self.traj.verdict(n, v, {"plan": impl.plan.kind, "cause": v.cause})
        self.last = (impl, v)
        if v.passed:
            assert v.runtime_ms is not None and v.speedup is not None
            self.traj.step(
                "observation", f"Verifier: passed, {v.runtime_ms:.4g} ms, {v.speedup:.2f}x over eager.", self.t
            )
            log = self.logs[impl.plan.kind]
            log.passed = True
            if log.best_ms is None or v.runtime_ms < log.best_ms:
                log.best_ms, log.best_speedup = v.runtime_ms, v.speedup
            self.beliefs[impl.plan.kind] = math.log(v.eager_ms / v.runtime_ms)
            if self.best is None or v.runtime_ms < (self.best.verdict.runtime_ms or math.inf):
                self.best = _Kept(impl, v)
        else:
            self.traj.step("observation", f"Verifier: {v.failure} ({v.cause}).", self.t)
            if impl.plan is not (self.best.impl.plan if self.best else None):
                self._failed(impl.plan, v.cause or "compile_error")

    def _failed(self, plan: KernelPlan, cause: str) -> None:
        log = self.logs[plan.kind]
        log.failures.append(cause)
        limit = int(self.p.persistence) + (self.draws.uniform(_PERSIST, plan.index) < self.p.persistence % 1)
        if len(log.failures) >= limit:
            log.abandoned = True
            self.traj.step("llm", f"Giving up on {plan.kind} after {len(log.failures)} failed tries.", self.t)

    # -- the end ------------------------------------------------------------------------------------

    def _final(self) -> tuple[Implementation, AnalyticVerdict]:
        d = self.draws
        impl: Implementation
        if self.best is not None:
            impl = self.best.impl
            if self.last is not None and not self.last[1].passed and d.uniform(_SLIP) < self.p.artifact_slip:
                impl = self.last[0]  # the last, broken try is what kernel.py holds
        elif d.uniform(_FALLBACK) < self.p.eager_fallback:
            impl = Implementation(self.space.plan("eager_only"), True, None, 1.0)
        elif self.last is not None:
            impl = self.last[0]
        else:
            tried = [k for k in self.considered if self.logs[k].tries] or self.considered
            impl = Implementation(self.space.plan(tried[-1]), False, "compile_error", 0.5)  # never finished
        if impl.correct and impl.plan.uses_dsl:
            marginal = impl.plan.failure_mix[self.dsl]["precision"] * _sigmoid(-self._logit(impl.plan))
            if d.uniform(_FLAKE) < FLAKE_RATE * marginal:
                impl = Implementation(impl.plan, False, "precision", impl.quality)
        verdict = choose_scorer(self.space, impl.plan, self.dsl).verify(self.space, self.dsl, impl, d, _VERIFY, 0)
        self.traj.verdict("final", verdict, {"plan": impl.plan.kind, "cause": verdict.cause})
        return impl, verdict

    def _write_skill(self, *, satisfied: bool, ran_out: bool) -> tuple[str | None, dict[str, str]]:
        d = self.draws
        if d.uniform(_SKILL) > self.p.upkeep and (ran_out or d.uniform(_SKILL, 1) < MISSING_SKILL_IN_TIME):
            self.traj.step("note", "SKILL.md was never updated.", self.t)
            return None, {}
        records = {}
        for kind in self.considered:
            log = self.logs[kind]
            plan = self.space.plan(kind)
            records[kind] = PlanRecord(
                kind=kind, tries=log.tries, failure_causes=log.failures, best_speedup=log.best_speedup,
                best_ms=log.best_ms, belief=self.beliefs[kind],
                true_speedup=min(SPEEDUP_CAP, self.space.eager_ms / plan.runtime_ms(self.dsl, self.p.quality)),
            )  # fmt: skip
        conclusions = Conclusions(
            problem=self.space.problem, dsl=self.dsl, reformulation=self.space.reformulation, plans=records,
            best=self.best.impl.plan.kind if self.best else None, satisfied=satisfied,
            inherited=[(c.text, self.task.source_labels.get(c.text, c.category)) for c in self.guidance.inherited],
        )  # fmt: skip
        text, sentences = write_skill(conclusions, self.p, self.draws.child(_WRITE))
        self.t += SKILL_WRITE_S * 0.5
        self.traj.step("command", "edit SKILL.md", self.t)
        self.traj.add(SkillWritten(attempt_id=self.spec.attempt_id, text=text, sha256=sha256(text)))
        self.traj.label(
            "skill",
            {
                "sha256": sha256(text),
                "sentences": [
                    {"text": s.text, "category": s.category, "plan": s.plan, "accurate": s.accurate,
                     "inherited": s.inherited}
                    for s in sentences
                ],
            },
        )  # fmt: skip
        return text, {s.text: s.category for s in sentences}

    def _comparison_labels(self, final: Implementation, verdict: AnalyticVerdict) -> dict[str, Any]:
        g = self.guidance
        adopted: dict[str, int] = {}
        for a in g.adoptions:
            if a.decision == "adopted":
                adopted[a.category] = adopted.get(a.category, 0) + 1
        return {
            "follow": g.follow,
            "adopted": adopted,
            "decisions": [
                {"sentence": a.index, "category": a.category, "plans": list(a.plans), "decision": a.decision}
                for a in g.adoptions
            ],
            "pruned": sorted(g.pruned),
            "agenda": list(g.agenda),
            "cap": g.cap,
            "cause": self._cause(final, verdict),
        }

    def _cause(self, final: Implementation, verdict: AnalyticVerdict) -> str | None:
        """The mechanism that held this attempt back (DESIGN §7 failure taxonomy), if any."""
        g = self.guidance
        if not verdict.passed:
            if final.plan.kind in g.pushed:
                return "unverified_adoption"
            if self.best is not None or self.submissions == 0:
                return "budget_or_artifact_mismanagement"
            return {
                "compile_error": "toolchain_friction",
                "precision": "rule_and_precision_failure",
                "not_dsl": "rule_and_precision_failure",
            }.get(verdict.cause or "", "faulty_execution")
        reachable_ms = min(
            (self.space.plan(k).runtime_ms(self.dsl, self.p.quality) for k in g.pruned), default=math.inf
        )
        if reachable_ms * HELP_AT < (verdict.runtime_ms or 0.0):
            return "search_truncation"  # a plan the skill ruled out would have helped
        if any(self.logs[k].failures for k in g.pushed):
            return "unverified_adoption"
        return None


_STOP_NOTES = {
    "submissions": "all 10 counted submissions are used",
    "capped": "the skill's target speedup is reached",
    "matched": "the speedup the skill reports is matched",
    "satisfied": "further work is not worth the remaining budget",
    "time": "the time budget is spent",
    "no_options": "no plan left worth trying",
}


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -40 else 0.0
