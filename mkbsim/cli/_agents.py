"""Running an LLM campaign file from the command line (`mkbsim run --campaign FILE`)."""

from __future__ import annotations

import dataclasses
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from mkbsim.cli._common import open_store
from mkbsim.errors import UserError

if TYPE_CHECKING:
    from mkbsim.agents import LlmCampaignConfig, SkillFilter


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
    lock = threading.Lock()

    def apply(text: str) -> str:
        with lock:  # attempts run in threads; a filter (and the model it may load) need not be thread-safe
            return chosen.apply(text).text

    return SkillFilter(config.filter, apply)


def run_campaign_file(campaign: Path, store_path: Path, *, workers: int | None = None) -> int:
    """Run (or resume) the LLM campaign described by ``campaign`` into the store; print its summary.

    ``workers`` overrides the file's ``[limits] agents``."""
    import torch

    from mkbsim.agents import VerifierSlots, load_env_file, load_llm_campaign, run_llm_campaign
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
    try:  # fail before any model is paid for
        scorers = VerifierSlots(config.verifier_backend, config.verifier_protocol, config.gpu_verifier_slots)
    except ValueError as exc:
        raise UserError(f"{campaign}: verifier: {exc}") from None
    with scorers:
        backend = scorers.backend
        if backend != "cuda":
            sys.stderr.write(
                f"warning: the {backend} verifier cannot run CuTe DSL kernels; CuTe DSL attempts will end in "
                'infra_error (use verifier.backend = "cuda" on a GPU machine)\n'
            )
        with open_store(store_path, create=True) as store:
            summary = run_llm_campaign(config, store, catalog, scorers, progress=lambda line: print(line, flush=True),
                                       skill_filter=skill_filter)  # fmt: skip
    for line in summary.lines():
        print(line)
    return 0
