"""Running an LLM campaign file from the command line (`mkbsim run --campaign FILE`)."""

from __future__ import annotations

import sys
from pathlib import Path

from mkbsim.cli._common import open_store
from mkbsim.errors import UserError


def run_campaign_file(campaign: Path, store_path: Path) -> int:
    """Run (or resume) the LLM campaign described by ``campaign`` into the store; print its summary."""
    import torch

    from mkbsim.agents import VerifierScorers, load_env_file, load_llm_campaign, run_llm_campaign
    from mkbsim.catalog import load_catalog

    config = load_llm_campaign(campaign)
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
    with VerifierScorers(config.verifier_backend, config.verifier_protocol) as scorers:
        try:
            backend = scorers.session().backend  # fail before any model is paid for
        except ValueError as exc:
            raise UserError(f"{campaign}: verifier: {exc}") from None
        if backend != "cuda":
            sys.stderr.write(
                f"warning: the {backend} verifier cannot run CuTe DSL kernels; CuTe DSL attempts will end in "
                'infra_error (use verifier.backend = "cuda" on a GPU machine)\n'
            )
        with open_store(store_path, create=True) as store:
            summary = run_llm_campaign(config, store, catalog, scorers, progress=lambda line: print(line, flush=True))
    for line in summary.lines():
        print(line)
    return 0
