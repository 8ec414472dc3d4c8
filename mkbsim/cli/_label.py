"""`mkbsim label`: rubric categories for skills, follow levels for skill-conditioned attempts and failure
classes for harmed comparisons, as LabelAssigned events; then every labeler's precision/recall against
the simulator's ground truth and Cohen's kappa between labelers."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from mkbsim.cli._common import add_store_option, open_lab
from mkbsim.errors import UserError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "label",
        help="label skills (rubric), follow levels and failure classes; labeler quality and agreement",
        description="Assigns rubric categories to every skill sentence, a follow level (full/partial/none) to "
        "every attempt that read a skill and a failure class to every harmed comparison whose treatment failed; "
        "subjects already labeled by the same labeler are skipped. Then prints per-label precision/recall of "
        "each labeler against the simulator's ground truth and Cohen's kappa between labelers.",
    )
    add_store_option(p)
    p.add_argument("--campaign", metavar="ID", help="only this campaign (default: every campaign)")
    p.add_argument("--labeler", required=True, metavar="NAME", help="heuristic, or llm:MODEL (a litellm model id)")
    p.add_argument("--api-base", metavar="URL", help="llm labeler: OpenAI-compatible endpoint (model id openai/NAME)")
    p.add_argument("--api-key-env", metavar="VAR", help="llm labeler: environment variable holding the API key")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="llm labeler: a model parameter for litellm (repeatable; VALUE read as JSON where it "
                   "parses, e.g. temperature=1, reasoning_effort=low); none by default")
    p.add_argument("--params", metavar="JSON", help="llm labeler: model parameters as one JSON object")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=_label)


def _model_params(as_json: str | None, pairs: list[str]) -> dict[str, Any]:
    """``--params JSON`` updated by each ``--param KEY=VALUE`` (VALUE as JSON where it parses, else text)."""
    params: dict[str, Any] = {}
    if as_json is not None:
        try:
            params = json.loads(as_json)
        except json.JSONDecodeError as exc:
            raise UserError(f"--params: not JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(params, dict):
            raise UserError("--params: give one JSON object, e.g. '{\"temperature\": 1}'")
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--param {pair!r}: use KEY=VALUE, e.g. temperature=1")
        try:
            params[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            params[key.strip()] = value
    return params


def _label(args: argparse.Namespace) -> int:
    from mkbsim.skills._label import GROUND_TRUTH, kappas, label, make_labeler, quality
    from mkbsim.skills._label_render import render_label_report

    params = _model_params(args.params, args.param)
    if args.api_base:
        params["api_base"] = args.api_base
        params["api_key"] = "unused"  # a local OpenAI-compatible server needs none, litellm wants one
    if args.api_key_env:
        if not os.environ.get(args.api_key_env):
            raise UserError(f"--api-key-env {args.api_key_env}: the variable is unset")
        params["api_key"] = os.environ[args.api_key_env]
    labeler = make_labeler(args.labeler, params)
    with open_lab(args.store, appends="labels") as lab:  # refused before a labeler (perhaps paid) runs
        material = lab.skills.material(args.campaign)
        counts = label(lab.store, lab.skills.labeled(labeler.name), material, labeler)
        labels = lab.skills.labels([*material.skills, *material.treatments])
    truth = labels.get(GROUND_TRUTH)
    result = {
        "labeler": labeler.name, "labeled": counts,
        "quality": {name: quality(truth, mine, material.harmed_failures)
                    for name, mine in sorted(labels.items()) if truth is not None and name != GROUND_TRUTH},
        "kappa": kappas(labels),
    }  # fmt: skip
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(render_label_report(result, has_truth=truth is not None))
    return 0
