"""Multi-hop skill chains, the simulator's side: the ids and seeds of chain hops (DESIGN §4).

A chain campaign (``mkbsim.campaigns.SimCampaign`` with ``chain = K``) runs, per (profile, problem, replicate),
both plain solos, then one chain per starting DSL: hop 0 is the solo in that DSL, hop k an attempt in the other
DSL than hop k-1 that reads hop k-1's skill verbatim under the neutral header. A hop's id and seed name its
chain's start and its hop number, so the hops of the two chains never share luck with each other or with a
plain treatment.
"""

from __future__ import annotations

import hashlib

from mkbsim.simulator._rng import seed_of


def chain_attempt_id(campaign_id: str, model: str, problem: str, start: str, hop: int, replicate: int) -> str:
    return hashlib.sha256(f"{campaign_id}|{model}|{problem}|{start}|{hop}|{replicate}".encode()).hexdigest()[:24]


def chain_seed(seed: int, model: str, problem: str, start: str, hop: int, replicate: int) -> int:
    return seed_of("mkbsim.simulator.chain", seed, model, problem, start, hop, replicate)
