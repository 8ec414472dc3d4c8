"""The LLM campaign file (TOML; ``examples/llm.toml`` shows every key) and ``.env`` loading.

Every mistake is reported as one line naming the file and the key. Relative paths (the sandbox
root, the env file) are relative to the current directory, like the store's path.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mkbsim.agents._attempt import LoopConfig
from mkbsim.agents._model import RESERVED_PARAMS, ModelConfig
from mkbsim.agents._reply import REPLY_FORMATS
from mkbsim.agents._sandbox import GIB, ISOLATIONS, SandboxConfig
from mkbsim.agents._transfer import DIRECTIONS
from mkbsim.campaigns._simulated import read_controls
from mkbsim.campaigns._toml import Table, read_toml
from mkbsim.catalog import Budget
from mkbsim.sandbox import DEFAULT_DISK_BYTES, DEFAULT_MAX_PROCESSES
from mkbsim.verifier import Protocol, resolve_protocol

_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class LlmCampaignConfig:
    path: Path
    campaign_id: str
    problems: str
    agents: tuple[ModelConfig, ...]
    sandbox: SandboxConfig
    directions: tuple[str, ...] = tuple(DIRECTIONS)
    replicates: int = 1
    cost_cap_usd: float | None = None
    env_file: Path = Path(".env")
    budget: Budget = field(default_factory=Budget)
    verifier_backend: str | None = None
    verifier_protocol: str = "paper"
    #: fail partial plans (eager code making the problem's products) as ``partial_plan``; the study accepted them
    verifier_require_full_plan: bool = False
    #: attempts in a DSL the verifier cannot run (CuTe DSL on cpu) end as infra_error without asking their model
    skip_unverifiable: bool = False
    loop: LoopConfig = field(default_factory=LoopConfig)
    raw: Mapping[str, Any] = field(default_factory=dict)
    #: attempts at once (LLM calls wait on the network: threads); 1 runs them one after another
    agents_at_once: int = 1
    #: verifier runs at once across all attempts; None: one per visible GPU (cuda), half the cores (cpu)
    gpu_verifier_slots: int | None = None
    #: a skill filter's name (``skill_filters``): treatments read their source's skill through it
    filter: str | None = None
    #: control arms (DESIGN §4) run beside each direction's treatment: aa, placebo, matched
    controls: tuple[str, ...] = ()

    @property
    def protocol(self) -> Protocol:
        """The verifier's protocol: ``[verifier] protocol``, requiring full plans where ``require_full_plan``."""
        return resolve_protocol(self.verifier_protocol, require_full_plan=self.verifier_require_full_plan)


def _agent(path: Path, index: int, data: Any) -> ModelConfig:
    t = Table(path, f"agents[{index}]", data, (
        "model", "name", "params", "api_key_env", "context_tokens", "request_timeout_s", "max_retries",
        "backoff_initial_s", "backoff_max_s", "reply_format", "price_per_mtok",
    ))  # fmt: skip
    params = t.get("params", dict, {})
    reserved = sorted(set(params) & RESERVED_PARAMS)
    if reserved:
        t.fail("params", f"{reserved[0]!r} is set by mkbsim itself (reserved: {', '.join(sorted(RESERVED_PARAMS))})")
    retries = t.get("max_retries", int, 6)
    if retries < 0:
        t.fail("max_retries", f"must be >= 0, got {retries}")
    context = t.get("context_tokens", int)
    if context is not None and context <= 0:
        t.fail("context_tokens", f"must be positive, got {context}")
    reply_format = t.get("reply_format", str, "auto")
    if reply_format not in REPLY_FORMATS:
        t.fail("reply_format", f"use {', '.join(map(repr, REPLY_FORMATS))}, got {reply_format!r}")
    return ModelConfig(
        model=t.get("model", str, required=True), params=params, name=t.get("name", str, ""),
        api_key_env=t.get("api_key_env", str), context_tokens=context,
        request_timeout_s=float(t.positive("request_timeout_s", 600.0)), max_retries=retries,
        backoff_initial_s=float(t.positive("backoff_initial_s", 2.0)),
        backoff_max_s=float(t.positive("backoff_max_s", 120.0)), reply_format=reply_format,
        price_per_mtok=_price(path, index, t.get("price_per_mtok", dict)),
    )  # fmt: skip


def _price(path: Path, index: int, data: dict[str, Any] | None) -> tuple[float, float] | None:
    """``price_per_mtok = { input = USD, output = USD }`` per million tokens (0 for a local model)."""
    if data is None:
        return None
    t = Table(path, f"agents[{index}].price_per_mtok", data, ("input", "output"))
    prices = tuple(float(t.get(key, (int, float), required=True)) for key in ("input", "output"))
    for key, price in zip(("input", "output"), prices, strict=True):
        if price < 0:
            t.fail(key, f"must be 0 or more (USD per million tokens), got {price:g}")
    return prices[0], prices[1]


def _sandbox(path: Path, data: Any) -> SandboxConfig:
    t = Table(path, "sandbox", data, (
        "root", "cpus", "memory_gb", "max_processes", "disk_gb", "command_timeout_s", "max_command_timeout_s",
        "output_chars", "isolation", "require_network_isolation",
    ))  # fmt: skip
    cpus = t.get("cpus", (int, list), 2)
    if isinstance(cpus, list):
        if not cpus or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
            t.fail("cpus", "a list of cpus must hold core numbers (integers >= 0)")
        cpus = tuple(cpus)
    elif cpus <= 0:
        t.fail("cpus", f"must be positive, got {cpus}")
    command_timeout = float(t.positive("command_timeout_s", 120.0))
    max_timeout = float(t.positive("max_command_timeout_s", 600.0))
    if command_timeout > max_timeout:
        t.fail("command_timeout_s", f"{command_timeout:g} exceeds max_command_timeout_s {max_timeout:g}")
    isolation = t.get("isolation", str, "bwrap")
    if isolation not in ISOLATIONS:
        t.fail("isolation", f"use {' or '.join(map(repr, ISOLATIONS))}, got {isolation!r}")
    require_network = t.get("require_network_isolation", bool, False)
    if require_network and isolation == "none":
        t.fail("require_network_isolation", 'true needs isolation = "bwrap" (commands reach the network without it)')
    return SandboxConfig(
        root=Path(t.get("root", str, "runs/sandboxes")), cpus=cpus,
        memory_bytes=int(t.positive("memory_gb", 8) * GIB), default_command_timeout_s=command_timeout,
        max_command_timeout_s=max_timeout, output_chars=t.positive("output_chars", 10_000, integer=True),
        max_processes=t.positive("max_processes", DEFAULT_MAX_PROCESSES, integer=True),
        disk_bytes=int(t.positive("disk_gb", DEFAULT_DISK_BYTES / GIB) * GIB), isolation=isolation,
        require_network_isolation=require_network,
    )  # fmt: skip


def _loop(path: Path, data: Any) -> LoopConfig:
    t = Table(path, "loop", data, ("summarize_at", "keep_recent_messages", "max_malformed_replies", "max_reply_chars"))
    summarize_at = float(t.positive("summarize_at", 0.8))
    if summarize_at >= 1:
        t.fail("summarize_at", f"must be a fraction of the context window below 1, got {summarize_at}")
    keep = t.positive("keep_recent_messages", 6, integer=True)
    if keep < 2:
        t.fail("keep_recent_messages", f"must be at least 2, got {keep}")
    return LoopConfig(
        summarize_at, keep, t.positive("max_malformed_replies", 8, integer=True),
        t.positive("max_reply_chars", LoopConfig.max_reply_chars, integer=True),
    )  # fmt: skip


def load_llm_campaign(path: str | os.PathLike[str]) -> LlmCampaignConfig:
    """Read and check an LLM campaign file."""
    file = Path(path)
    raw = read_toml(file)
    top = Table(file, "", raw, ("campaign", "budget", "verifier", "sandbox", "loop", "limits", "agents"))
    c = Table(file, "campaign", top.get("campaign", dict, required=True), (
        "kind", "id", "problems", "directions", "replicates", "cost_cap_usd", "env_file", "filter", "controls",
    ))  # fmt: skip
    if c.get("kind", str, "llm") != "llm":
        c.fail("kind", 'an LLM campaign file has kind = "llm" (simulated campaigns: examples/simulated.toml)')
    campaign_id = c.get("id", str, required=True)
    if not _ID.match(campaign_id):
        c.fail("id", f"use letters, digits, '_', '.' and '-' only, got {campaign_id!r}")
    problems = c.get("problems", (str, list), required=True)
    if isinstance(problems, list):
        if not problems or not all(isinstance(p, str) for p in problems):
            c.fail("problems", "a list of problems must hold ids or names (strings)")
        problems = ",".join(problems)
    directions = c.get("directions", list, list(DIRECTIONS))
    bad = [d for d in directions if d not in DIRECTIONS]
    if bad or not directions:
        c.fail("directions", f"use a non-empty list of {', '.join(DIRECTIONS)}; got {bad or directions}")
    cap = c.get("cost_cap_usd", (int, float))
    if cap is not None and cap <= 0:
        c.fail("cost_cap_usd", f"must be positive, got {cap}")
    env_file = c.get("env_file", str, ".env")
    skill_filter = c.get("filter", str)
    if skill_filter is not None and not skill_filter.strip():
        c.fail("filter", "name a skill filter (`mkbsim filter-test --list`), or leave the key out")
    controls = read_controls(c)

    lim = Table(file, "limits", top.get("limits", dict, {}), ("agents", "gpu_verifier_slots"))
    agents_at_once = lim.positive("agents", 1, integer=True)
    slots = lim.get("gpu_verifier_slots", int)
    if slots is not None and slots <= 0:
        lim.fail("gpu_verifier_slots", f"must be positive, got {slots}")

    b = Table(file, "budget", top.get("budget", dict, {}), ("minutes", "submissions"))
    budget = Budget(b.positive("minutes", 40, integer=True), b.positive("submissions", 10, integer=True))

    v = Table(file, "verifier", top.get("verifier", dict, {}),
              ("backend", "protocol", "skip_unverifiable", "require_full_plan"))  # fmt: skip
    backend = v.get("backend", str)
    if backend not in (None, "cuda", "cpu"):
        v.fail("backend", f"use cuda or cpu, got {backend!r}")
    protocol = v.get("protocol", str, "paper")
    if protocol not in ("paper", "hardened"):
        v.fail("protocol", f"use paper or hardened, got {protocol!r}")

    agents_raw = top.get("agents", list, required=True)
    if not agents_raw:
        top.fail("agents", "list at least one agent ([[agents]] with a model)")
    agents = tuple(_agent(file, i, a) for i, a in enumerate(agents_raw))
    labels = [a.label for a in agents]
    if len(set(labels)) != len(labels):
        top.fail("agents", f"two agents share the name {next(x for x in labels if labels.count(x) > 1)!r}")

    # the env file's values are secrets wherever they show up (read here: on Ray, workers get the values only)
    sandbox = _sandbox(file, top.get("sandbox", dict, {}))
    sandbox = dataclasses.replace(sandbox, secret_env=env_file_names(Path(env_file)))
    return LlmCampaignConfig(
        path=file, campaign_id=campaign_id, problems=problems, agents=agents,
        sandbox=sandbox, directions=tuple(directions),
        replicates=c.positive("replicates", 1, integer=True), cost_cap_usd=float(cap) if cap is not None else None,
        env_file=Path(env_file), budget=budget, verifier_backend=backend,
        verifier_protocol=protocol, skip_unverifiable=v.get("skip_unverifiable", bool, False),
        verifier_require_full_plan=v.get("require_full_plan", bool, False),
        loop=_loop(file, top.get("loop", dict, {})), raw=raw, agents_at_once=agents_at_once,
        gpu_verifier_slots=slots, filter=skill_filter, controls=controls,
    )  # fmt: skip


def env_file_names(path: Path) -> tuple[str, ...]:
    """The variables a ``.env`` file sets (none for a missing file)."""
    if not path.is_file():
        return ()
    from dotenv import dotenv_values

    return tuple(name for name, value in dotenv_values(path).items() if value is not None)


def load_env_file(path: Path) -> list[str]:
    """Put a ``.env`` file's variables into the environment (values already set win); returns
    the names it set. A missing file sets nothing."""
    if not path.is_file():
        return []
    from dotenv import dotenv_values

    names = []
    for name, value in dotenv_values(path).items():
        if value is not None and name not in os.environ:
            os.environ[name] = value
            names.append(name)
    return names
