"""`mkbsim report --section model`: mixed-effects models of the comparisons (DESIGN §6), with statsmodels
(imported here only).

- Runtime model: log r ~ model × direction + family (fixed), problem as a random intercept (MixedLM,
  REML), over comparisons where both arms passed. Every optimiser in ``METHODS`` is tried, in that order;
  the converged fit with the highest REML log-likelihood is kept (an earlier method wins a tie), and the
  result names it. Where none converged, the best fit is reported with ``converged: false`` and the
  table says its estimates come from a fit that did not converge. Verdict flips (r = 4 or 1/4 by rule), joint failures
  and skipped treatments (r = 1 by rule) are not runtime measurements: on a continuous scale they would
  be point masses at the clip bounds and at 0, so they are modelled apart.
- Flip models: P(rescue | baseline failed) and P(break | baseline passed), logistic in model +
  direction, with standard errors clustered by problem (the comparisons of one problem are not
  independent). Skipped treatments inherit the baseline outcome and are left out. A model or direction
  whose comparisons all flipped, or none did, separates the data (its log odds has no finite maximum:
  statsmodels stops at ±20 with meaningless standard errors); such levels are reported with their counts
  under ``separated`` and left out of the fit, repeatedly until none is left. A separation that no single
  level explains (statsmodels' PerfectSeparationWarning) is reported in the model's note.
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
#: MixedLM optimisers in the order tried. Gradient-free ones first: the problem variance often sits at
#: its boundary 0, where the gradient methods stop short ("converged" or not) at a lower likelihood.
METHODS = ("powell", "nm", "lbfgs", "bfgs")


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
    import numpy as np
    import pandas as pd
    import patsy
    import statsmodels.formula.api as smf

    formula = "log_r ~ C(model) * C(direction) + C(family)"
    base: Row = {"formula": formula + " + (1 | problem)", "n": len(data), "problems": int(data.problem.nunique())}
    fit, method, tried = _best_fit(smf.mixedlm(formula, data, groups=data["problem"]), np)
    base["fits"] = tried
    if fit is None:
        return base | {"method": None, "converged": False, "log_likelihood": None, "problem_variance": None,
                       "residual_variance": None, "terms": None, "cells": None}  # fmt: skip
    ci = fit.conf_int()
    terms = [{"term": term, "estimate": _num(fit.fe_params[term]), "se": _num(fit.bse_fe[term]),
              "p": _num(fit.pvalues[term]), "ci": [_num(ci.loc[term, 0]), _num(ci.loc[term, 1])]}
             for term in fit.fe_params.index]  # fmt: skip
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
    return base | {
        "n": int(fit.nobs), "method": method, "converged": bool(fit.converged), "log_likelihood": _num(fit.llf),
        "problem_variance": _num(fit.cov_re.iloc[0, 0]), "residual_variance": _num(fit.scale), "terms": terms,
        "cells": cells,
    }  # fmt: skip


def _best_fit(model: Any, np: Any) -> tuple[Any, str | None, list[Row]]:
    """Fit ``model`` (REML) with every optimiser in ``METHODS``; keep the converged fit with the highest
    log-likelihood, else the highest non-converged one. Returns it, its method and every attempt."""
    import warnings

    best: tuple[tuple[bool, float], Any, str | None] = ((False, -math.inf), None, None)
    tried: list[Row] = []
    for method in METHODS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence chatter; the result says whether it converged
            try:
                fit = model.fit(reml=True, method=method)
            except (ValueError, np.linalg.LinAlgError) as exc:  # a singular Hessian on the way, say
                tried.append({"method": method, "converged": False, "log_likelihood": None, "error": str(exc)})
                continue
        llf = _num(fit.llf)
        tried.append({"method": method, "converged": bool(fit.converged), "log_likelihood": llf, "error": None})
        rank = (bool(fit.converged), -math.inf if llf is None else llf)
        if best[1] is None or rank > best[0]:
            best = (rank, fit, method)
    return best[1], best[2], tried


def _flip_model(name: str, data: Any, target: str, np: Any) -> Row:
    import warnings

    import statsmodels.api as sm
    import statsmodels.formula.api as smf
    from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

    base: Row = {"flip": name, "n": len(data), "events": int(data[target].sum())}
    data, separated = _without_separated_levels(data, target)
    base["separated"] = separated
    if data.empty or data[target].all() or not data[target].any() or data.problem.nunique() < 3:
        return base | {"terms": None, "note": "no variation left to model"}
    groups = data["problem"].astype("category").cat.codes
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit = smf.glm(f"{target} ~ C(model) + C(direction)",
                          data.assign(**{target: data[target].astype(float)}), family=sm.families.Binomial(),
                          ).fit(cov_type="cluster", cov_kwds={"groups": groups})  # fmt: skip
        except (ValueError, np.linalg.LinAlgError) as exc:
            return base | {"terms": None, "note": f"not estimable: {exc}"}
    ci = fit.conf_int()
    terms = [{"term": t, "log_odds": _num(fit.params[t]), "se": _num(fit.bse[t]), "p": _num(fit.pvalues[t]),
              "ci": [_num(ci.loc[t, 0]), _num(ci.loc[t, 1])]} for t in fit.params.index]  # fmt: skip
    residual = any(issubclass(w.category, PerfectSeparationWarning) for w in caught)
    note = "separation remains (a combination of levels predicts every outcome): estimates unreliable"
    return base | {"n_fitted": len(data), "terms": terms, "note": note if residual else None}


def _without_separated_levels(data: Any, target: str) -> tuple[Any, list[Row]]:
    """``data`` less every model or direction whose comparisons all have, or all lack, the outcome (its
    log odds would be infinite), repeated until none is left; and those levels with their counts."""
    separated: list[Row] = []
    while not data.empty:
        found = []
        for factor in ("model", "direction"):
            counts = data.groupby(factor, observed=True)[target].agg(["sum", "count"])
            found += [(factor, level, int(row["sum"]), int(row["count"])) for level, row in counts.iterrows()
                      if row["sum"] in (0, row["count"])]  # fmt: skip
        if not found or len(found) == sum(data[f].nunique() for f in ("model", "direction")):
            break  # nothing separated, or every level (no variation at all: nothing left to fit)
        separated += [{"factor": f, "level": level, "events": k, "n": n} for f, level, k, n in found]
        for factor, level, _, _ in found:
            data = data[data[factor] != level]
    return data, separated
