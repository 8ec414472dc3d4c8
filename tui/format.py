"""How values look on screen: numbers, verdicts, outcomes, durations, and the rubric's colours."""

from __future__ import annotations

from datetime import timedelta

from rich.text import Text

from mkbsim.metrics import arm_kind

DSL_NAMES = {"cutedsl": "CuTe DSL", "tirx": "TIRx"}
DSL_SHORT = {"cutedsl": "CuTe", "tirx": "TIRx"}
DIRECTION_NAMES = {"cutedsl2tirx": "CuTe→TIRx", "tirx2cutedsl": "TIRx→CuTe"}
SOLO_NAMES = {"solo_cutedsl": "solo CuTe", "solo_tirx": "solo TIRx"}
#: control arms (DESIGN §4) after their direction: "CuTe→TIRx A/A"
CONTROL_NAMES = {"aa": "A/A", "placebo": "placebo", "matched": "matched"}
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


def arm(name: str | None) -> str:
    """An arm as lists show it: "solo CuTe", "CuTe→TIRx" (the skill-conditioned arm), "CuTe→TIRx A/A"."""
    if name is None:
        return "?"
    if name in SOLO_NAMES:
        return SOLO_NAMES[name]
    known = arm_kind(name)
    if known is None:
        return name
    direction, kind = known
    return DIRECTION_NAMES[direction] + ("" if kind == "skill" else f" {CONTROL_NAMES[kind]}")


def percent(x: float | None, *, signed: bool = False) -> str:
    if x is None:
        return "—"
    return f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%"


def count(n: int) -> str:
    """A count in at most five cells: 9,999 then 12.3k, 123k, 1.2M."""
    if n < 10_000:
        return f"{n:,}"
    if n < 100_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"


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


#: Campaign kinds (``CampaignStarted.config["kind"]``) as lists show them.
KIND_NAMES = {"simulated": "simulated", "simulated_chain": "chain", "treatment_rerun": "filter test", "llm": "LLM"}


def kind(name: str) -> str:
    return KIND_NAMES.get(name, name)


def model(name: str, width: int | None = None) -> str:
    """A model's name as every screen shows it in ``width`` cells: whole where it fits; else without its
    provider path ("openrouter/meta-llama/llama-3.1-405b" → "llama-3.1-405b"), then without the simulator's
    "sim-" prefix, then cut in the middle, so that both the family and the variant stay ("glm-5.3-flash" →
    "glm-…flash")."""
    if width is None or len(name) <= width:
        return name
    short = name.rsplit("/", 1)[-1]
    for candidate in (short, short.removeprefix("sim-")):
        if len(candidate) <= width:
            return candidate
        short = candidate
    return middle(short, width)


def middle(text: str, width: int) -> str:
    """``text`` in ``width`` cells, cut in the middle ("sim-b4274596e1422515" → "sim-b4…422515")."""
    if len(text) <= width:
        return text
    if width < 3:
        return text[:width]
    head = (width - 1) // 2
    return f"{text[:head]}…{text[len(text) - (width - 1 - head):]}"
