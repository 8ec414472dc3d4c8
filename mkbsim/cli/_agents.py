"""Running an LLM campaign file from the command line (`mkbsim run --campaign FILE`)."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkbsim.cli._common import open_store
from mkbsim.errors import UserError

if TYPE_CHECKING:
    from mkbsim.agents import LlmCampaignConfig, SkillFilter


class _PluginFilter:
    """A ``skill_filters`` filter as the text → text callable a campaign applies. It ships to Ray workers by
    name (each worker gets the filter from its own ``skill_filters``: a filter may hold a model)."""

    def __init__(self, name: str, chosen: Any = None) -> None:
        self.name, self._chosen, self._lock = name, chosen, threading.Lock()

    def __call__(self, text: str) -> str:
        with self._lock:  # attempts run in threads; a filter (and the model it may load) need not be thread-safe
            if self._chosen is None:
                import skill_filters

                self._chosen = skill_filters.get(self.name)
            result: str = self._chosen.apply(text).text
            return result

    def __reduce__(self) -> tuple[type[_PluginFilter], tuple[str]]:
        return _PluginFilter, (self.name,)


def resolve_filter(campaign: Path, config: LlmCampaignConfig) -> SkillFilter | None:
    """The skill filter that ``campaign.filter`` names, as the text → text callable the campaign applies.

    Resolved here, in the composition root: ``skill_filters`` depends on mkbsim, never the reverse.
    """
    if config.filter is None:
        return None
    import skill_filters
    from mkbsim.agents import SkillFilter

    try:
        chosen = skill_filters.get(config.filter)
    except UserError as exc:
        raise UserError(f"{campaign}: campaign.filter: {exc}") from None
    return SkillFilter(config.filter, _PluginFilter(config.filter, chosen))


def run_campaign_file(
    campaign: Path,
    store_path: Path,
    *,
    workers: int | None = None,
    executor: str = "local",
    ray_address: str | None = None,
) -> int:
    """Run (or resume) the LLM campaign described by ``campaign`` into the store; print its summary.

    ``workers`` overrides the file's ``[limits] agents``; ``executor`` ``ray`` runs the attempts as Ray
    tasks (on the cluster at ``ray_address``) and the verifiers as Ray actors."""
    import torch

    from mkbsim.agents import (
        RayVerifiers,
        VerifierSlots,
        attempt_cpus,
        load_env_file,
        load_llm_campaign,
        run_llm_campaign,
        unscorable,
    )
    from mkbsim.catalog import load_catalog

    config = load_llm_campaign(campaign)
    if workers is not None:
        config = dataclasses.replace(config, agents_at_once=workers)
    skill_filter = resolve_filter(campaign, config)
    names = load_env_file(config.env_file)
    if names:
        print(f"loaded {', '.join(sorted(names))} from {config.env_file}")
    for index, agent in enumerate(config.agents):
        missing = agent.missing_keys()
        if not missing:
            continue
        where = f"{campaign}: agents[{index}] ({agent.label}): {', '.join(missing)} not set"
        if "api_base" in agent.params:  # a local server may need no key
            sys.stderr.write(f"warning: {where}\n")
        else:
            raise UserError(f"{where} (export it or put it in {config.env_file})")
    torch.set_num_threads(1)
    catalog = load_catalog()
    scorers: VerifierSlots | RayVerifiers
    try:  # fail before any model is paid for
        if executor == "ray":
            from mkbsim.campaigns import connect_ray

            # the keys this run loaded or names reach the attempts on other nodes (only those: a worker's
            # environment is its node's)
            shipped = [*names, *(a.api_key_env for a in config.agents if a.api_key_env)]
            env = {name: os.environ[name] for name in shipped if name in os.environ}
            connect_ray(ray_address, config.agents_at_once * attempt_cpus(config), env)
            scorers = RayVerifiers(config.verifier_backend, config.verifier_protocol, config.gpu_verifier_slots)
        else:
            scorers = VerifierSlots(config.verifier_backend, config.verifier_protocol, config.gpu_verifier_slots)
    except ValueError as exc:
        raise UserError(f"{campaign}: verifier: {exc}") from None
    with scorers:
        why = unscorable(scorers.backend, "cutedsl")
        if why is not None:
            how = "without asking their model" if config.skip_unverifiable else "(their kernels are not verified)"
            sys.stderr.write(f"warning: {why}; CuTe DSL attempts will end in infra_error {how}\n")
        with open_store(store_path, create=True) as store:
            summary = run_llm_campaign(
                config, store, catalog, scorers, progress=lambda line: print(line, flush=True),
                skill_filter=skill_filter, executor=executor, ray_address=ray_address,
            )  # fmt: skip
    for line in summary.lines():
        print(line)
    return 0
