"""`mkbsim report --section model`: mixed-effects models of the comparisons (DESIGN §6), with statsmodels
(imported here only).

- Runtime model: log r ~ model × direction + family (fixed), problem as a random intercept (MixedLM,
  REML), over comparisons where both arms passed. Verdict flips (r = 4 or 1/4 by rule), joint failures
  and skipped treatments (r = 1 by rule) are not runtime measurements: on a continuous scale they would
  be point masses at the clip bounds and at 0, so they are modelled apart.
- Flip models: P(rescue | baseline failed) and P(break | baseline passed), logistic in model +
  direction, with standard errors clustered by problem (the comparisons of one problem are not
  independent). Skipped treatments inherit the baseline outcome and are left out.
Each cell's predicted lift (runtime model) averages the family effects with equal weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mkbsim.lab import VerdictRecord

Row = dict[str, Any]
Z95 = 1.959963984540054  # the normal 97.5% quantile (Wald intervals of the fixed effects)


def _num(x: Any) -> Any:
    """A float, or None where statsmodels gives NaN or infinity (a standard error at a boundary, say)."""
    value = float(x)
    return value if math.isfinite(value) else None


def mixed_models(records: Sequence[VerdictRecord], progress: Callable[[str], None] | None = None) -> Row:
    import warnings

    import numpy as np
    import pandas as pd

    from mkbsim.metrics._rules import ratio

    say = progress or (lambda _: None)
    frame = pd.DataFrame([{
        "model": c.model, "direction": c.direction, "family": c.family, "problem": c.problem,
        "both_passed": c.baseline_passed and c.treatment_passed and not c.skipped,
        "baseline_passed": c.baseline_passed, "treatment_passed": c.treatment_passed, "skipped": c.skipped,
        "log_r": math.log(ratio(c.baseline_passed, c.baseline_runtime_ms, c.treatment_passed,
                                c.treatment_runtime_ms, skipped=c.skipped)),
    } for c in records])  # fmt: skip
    out: Row = {"n": len(frame)}
    runtime = frame[frame.both_passed]
    say(f"fitting the runtime model (MixedLM) on {len(runtime):,} comparisons")
    out["runtime"] = _runtime_model(runtime) if runtime.problem.nunique() >= 3 else None
    out["flips"] = []
    for name, subset, target in (("rescue", ~frame.baseline_passed, "treatment_passed"),
                                 ("break", frame.baseline_passed, "failed")):  # fmt: skip
        data = frame[subset & ~frame.skipped].assign(failed=lambda d: ~d.treatment_passed)
        say(f"fitting the {name} model (logistic, problem-clustered) on {len(data):,} comparisons")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out["flips"].append(_flip_model(name, data, target, np))
    return out


def _runtime_model(data: Any) -> Row:
    import warnings

    import numpy as np
    import statsmodels.formula.api as smf

    formula = "log_r ~ C(model) * C(direction) + C(family)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter; the result says whether it converged
        fit = smf.mixedlm(formula, data, groups=data["problem"]).fit(reml=True)
    ci = fit.conf_int()
    terms = [{"term": term, "estimate": _num(fit.fe_params[term]), "se": _num(fit.bse_fe[term]),
              "p": _num(fit.pvalues[term]), "ci": [_num(ci.loc[term, 0]), _num(ci.loc[term, 1])]}
             for term in fit.fe_params.index]  # fmt: skip
    import pandas as pd
    import patsy

    families = sorted(data.family.unique())
    design = fit.model.data.orig_exog.design_info  # patsy keeps the formula's coding here
    cov = fit.cov_params().loc[fit.fe_params.index, fit.fe_params.index].to_numpy()
    cells = []
    for model in sorted(data.model.unique()):
        for direction in sorted(data.direction.unique()):
            grid = pd.DataFrame({"model": model, "direction": direction, "family": families, "log_r": 0.0})
            mean = np.asarray(patsy.build_design_matrices([design], grid)[0]).mean(axis=0)
            estimate = float(mean @ fit.fe_params.to_numpy())
            variance = _num(mean @ cov @ mean)
            half = Z95 * math.sqrt(variance) if variance is not None and variance >= 0 else None
            cells.append({"model": model, "direction": direction, "lift": _num(math.expm1(estimate)),
                          "lift_ci": None if half is None else [math.expm1(estimate - half),
                                                                math.expm1(estimate + half)]})  # fmt: skip
    return {
        "formula": formula + " + (1 | problem)", "n": int(fit.nobs), "problems": int(data.problem.nunique()),
        "converged": bool(fit.converged), "problem_variance": _num(fit.cov_re.iloc[0, 0]),
        "residual_variance": _num(fit.scale), "terms": terms, "cells": cells,
    }  # fmt: skip


def _flip_model(name: str, data: Any, target: str, np: Any) -> Row:
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    base: Row = {"flip": name, "n": len(data), "events": int(data[target].sum())}
    if base["events"] == 0 or base["events"] == len(data) or data.problem.nunique() < 3:
        return base | {"terms": None, "note": "no variation to model"}
    groups = data["problem"].astype("category").cat.codes
    try:
        fit = smf.glm(f"{target} ~ C(model) + C(direction)", data.assign(**{target: data[target].astype(float)}),
                      family=sm.families.Binomial()).fit(cov_type="cluster", cov_kwds={"groups": groups})  # fmt: skip
    except (ValueError, np.linalg.LinAlgError) as exc:  # perfect separation and the like
        return base | {"terms": None, "note": f"not estimable: {exc}"}
    ci = fit.conf_int()
    terms = [{"term": t, "log_odds": _num(fit.params[t]), "se": _num(fit.bse[t]), "p": _num(fit.pvalues[t]),
              "ci": [_num(ci.loc[t, 0]), _num(ci.loc[t, 1])]} for t in fit.params.index]  # fmt: skip
    return base | {"terms": terms, "note": None}
