"""What `mkbsim run --campaign FILE` needs for an LLM campaign file before the lifecycle runs it: the file,
the keys (its env file, each agent's key), the verifier's scorers, and skill filters resolved by name."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkbsim.errors import UserError

if TYPE_CHECKING:
    from mkbsim.agents import LlmCampaign, LlmCampaignConfig, RayVerifiers, VerifierSlots
    from mkbsim.campaigns import SkillTransform


class _PluginFilter:
    """A skill filter (``mkbsim.plugins``) as the text → text callable a campaign applies. It pickles by name (a
    process that unpickles it gets the filter from its own installation: a filter may hold a model)."""

    def __init__(self, name: str, chosen: Any = None) -> None:
        self.name, self._chosen, self._lock = name, chosen, threading.Lock()

    def __call__(self, text: str) -> str:
        with self._lock:  # a filter (and the model it may load) need not be thread-safe
            if self._chosen is None:
                from mkbsim.plugins import get_filter

                self._chosen = get_filter(self.name)
            result: str = self._chosen.apply(text).text
            return result

    def __reduce__(self) -> tuple[type[_PluginFilter], tuple[str]]:
        return _PluginFilter, (self.name,)


def skill_transform(name: str | None, where: str = "") -> SkillTransform | None:
    """The skill filter ``name`` (``mkbsim.plugins.get_filter``; "a+b" composes) as the transform a campaign applies.

    Found through its entry point (``mkbsim.plugins``): ``skill_filters`` depends on mkbsim, never the reverse."""
    if name is None:
        return None
    from mkbsim.campaigns import SkillTransform
    from mkbsim.plugins import get_filter

    try:
        chosen = get_filter(name)
    except UserError as exc:
        raise UserError(f"{where}{exc}") from None
    return SkillTransform(name, _PluginFilter(name, chosen))


def resolve_filter(campaign: Path, config: LlmCampaignConfig) -> SkillTransform | None:
    """The skill filter that an LLM campaign file's ``campaign.filter`` names."""
    return skill_transform(config.filter, f"{campaign}: campaign.filter: ")


def llm_campaign(
    campaign: Path, *, workers: int | None, executor: str, ray_address: str | None
) -> tuple[LlmCampaign, SkillTransform | None, RayVerifiers | VerifierSlots]:
    """The LLM campaign ``campaign`` describes, its skill filter, and its scorers (close them when the campaign
    ends).

    Checked before any model is paid for: the file, its filter, every agent's key (after loading the env file)
    and the verifier. ``workers`` overrides the file's ``[limits] agents``; on the ``ray`` executor the
    verifiers are Ray actors and the keys this run loaded or names go to every task."""
    import torch

    from mkbsim.agents import (
        LlmCampaign,
        RayVerifiers,
        VerifierSlots,
        attempt_cpus,
        load_env_file,
        load_llm_campaign,
        unscorable,
    )
    from mkbsim.catalog import load_catalog

    config = load_llm_campaign(campaign)
    if workers is not None:
        config = dataclasses.replace(config, agents_at_once=workers)
    transform = resolve_filter(campaign, config)
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
    scorers: VerifierSlots | RayVerifiers
    try:  # fail before any model is paid for
        if executor == "ray":
            from mkbsim.campaigns import connect_ray

            # the keys this run loaded or names reach the attempts on other nodes (only those: a worker's
            # environment is its node's)
            shipped = [*names, *(a.api_key_env for a in config.agents if a.api_key_env)]
            env = {name: os.environ[name] for name in shipped if name in os.environ}
            connect_ray(ray_address, config.agents_at_once * attempt_cpus(config), env)
            scorers = RayVerifiers(config.verifier_backend, config.protocol, config.gpu_verifier_slots)
        else:
            scorers = VerifierSlots(config.verifier_backend, config.protocol, config.gpu_verifier_slots)
    except ValueError as exc:
        raise UserError(f"{campaign}: verifier: {exc}") from None
    why = unscorable(scorers.backend, "cutedsl")
    if why is not None:
        how = "without asking their model" if config.skip_unverifiable else "(their kernels are not verified)"
        sys.stderr.write(f"warning: {why}; CuTe DSL attempts will end in infra_error {how}\n")
    return LlmCampaign(config, load_catalog(), scorers), transform, scorers
