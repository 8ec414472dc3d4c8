"""How values look on screen: numbers, verdicts, outcomes, durations, and the rubric's colours."""

from __future__ import annotations

from datetime import timedelta

from rich.text import Text

DSL_NAMES = {"cutedsl": "CuTe DSL", "tirx": "TIRx"}
DSL_SHORT = {"cutedsl": "CuTe", "tirx": "TIRx"}
DIRECTION_NAMES = {"cutedsl2tirx": "CuTe→TIRx", "tirx2cutedsl": "TIRx→CuTe"}
ARM_NAMES = {
    "solo_cutedsl": "solo CuTe",
    "solo_tirx": "solo TIRx",
    "cutedsl2tirx_skill": "CuTe→TIRx",
    "tirx2cutedsl_skill": "TIRx→CuTe",
}
#: Short family names for plot axes (DESIGN §8 families).
FAMILY_SHORT = {
    "attention": "attn",
    "kv_cache": "kv",
    "linear_attention": "linattn",
    "mlp_norm": "mlp",
    "moe": "moe",
    "quantization": "quant",
}
OUTCOME_STYLES = {"helped": "bold green", "harmed": "bold red", "neutral": "dim"}
STANDING_STYLES = {"above": "green", "same": "yellow", "below": "red"}
VERDICT_CHANGE_STYLES = {"rescue": "green", "break": "red"}

#: Rubric category (DESIGN §7) → (three-letter tag, colour): findings green/cyan, diagnoses blue,
#: conditions and questions purple, the categories the study links to harm red/orange/yellow.
CATEGORY_STYLES: dict[str, tuple[str, str]] = {
    "evidence_backed_finding": ("EVI", "green"),
    "verified_reformulation": ("REF", "bright_green"),
    "work_partitioning": ("PRT", "cyan"),
    "failure_diagnosis": ("DIA", "dodger_blue1"),
    "applicability_condition": ("CND", "medium_purple1"),
    "open_question": ("QST", "orchid"),
    "unsupported_closure": ("CLO", "red1"),
    "agenda_handoff": ("AGD", "dark_orange"),
    "ambition_capping": ("CAP", "yellow"),
    "unverified_claim": ("UNV", "light_salmon1"),
    "dsl_recipe_leak": ("DSL", "grey62"),
}


def percent(x: float | None, *, signed: bool = False) -> str:
    if x is None:
        return "—"
    return f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%"


def speedup(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


def ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.2f}"


def lift(x: float | None) -> Text:
    if x is None:
        return Text("—", style="dim")
    return Text(percent(x, signed=True), style="green" if x > 0 else "red" if x < 0 else "")


def verdict(passed: bool | int | None, x: float | None, *, resolved: bool = True) -> Text:
    """A final verdict in a cell: ✓ and the speedup, ✗ for a failure, … while unresolved."""
    if not resolved or passed is None:
        return Text("…", style="dim")
    if passed:
        return Text(f"✓ {speedup(x)}", style="green")
    return Text("✗ fail", style="red")


def outcome(value: str | None) -> Text:
    if value is None:
        return Text("pending", style="dim italic")
    return Text(value, style=OUTCOME_STYLES.get(value, ""))


def verdict_change(value: str | None) -> Text:
    if value in (None, "none"):
        return Text("·", style="dim")
    return Text(str(value), style=VERDICT_CHANGE_STYLES.get(str(value), ""))


def standing(value: str | None) -> Text:
    return Text(value or "—", style=STANDING_STYLES.get(value or "", "dim"))


def category_tag(category: str) -> Text:
    tag, colour = CATEGORY_STYLES.get(category, ("???", "white"))
    return Text(tag, style=f"bold {colour}")


def duration(value: timedelta | float | None) -> str:
    """1h02m, 12m05s or 45s."""
    if value is None:
        return "—"
    seconds = int(value.total_seconds() if isinstance(value, timedelta) else value)
    hours, rest = divmod(max(0, seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def agent_clock(seconds: float | None) -> str:
    """An agent's clock as mm:ss (the 40-minute budget fits)."""
    if seconds is None:
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


def short_id(identifier: str, size: int = 8) -> str:
    return identifier[:size]
