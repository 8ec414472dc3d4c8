"""The two task variants of a problem (CuTe DSL, TIRx), rendered from one template (DESIGN §4-5).

The variants differ only in the DSL: its name, its import line and where its documentation index
lives in the agent's sandbox. Everything else is the same text.
"""

from __future__ import annotations

from dataclasses import dataclass

from mkbsim.catalog._loader import Problem

SKILL_HEADER = (
    "## Skill from a prior attempt\n\n"
    "This skill was distilled while working on this same problem in a different kernel DSL.\n\n"
)


@dataclass(frozen=True)
class Dsl:
    key: str
    title: str
    import_line: str
    docs_index: str
    summary: str


DSLS: dict[str, Dsl] = {
    "cutedsl": Dsl(
        key="cutedsl",
        title="CuTe DSL",
        import_line="import cutlass, cutlass.cute as cute",
        docs_index="docs/cutedsl/INDEX.md",
        summary="CuTe DSL (nvidia-cutlass-dsl) uses layout algebra to partition data and computation across threads.",
    ),
    "tirx": Dsl(
        key="tirx",
        title="TIRx",
        import_line="import tvm; from tvm.script import tirx as T",
        docs_index="docs/tirx/INDEX.md",
        summary="TIRx (apache-tvm) uses storage layouts to guide compiler dispatch of tile primitives.",
    ),
}


@dataclass(frozen=True)
class Budget:
    minutes: int = 40
    submissions: int = 10


_TEMPLATE = """\
# Task {problem_id}: {name} ({dsl_title} variant)

{description}

## Interface
Write `kernel.py` defining `run({signature})`.
Inputs (in this order):
{inputs}
Outputs (returned in this order{inplace_note}):
{outputs}
{notes}
## Language
Implement the work in {dsl_title}: {dsl_summary} Import it as `{import_line}`. Its documentation index
is at `{docs_index}` in your sandbox. Your file may mix eager PyTorch, plain Python and {dsl_title}
kernels; how you split the work between eager PyTorch and {dsl_title} is your choice. Kernel source
must live in `kernel.py` itself (the DSL reads the source file).

## Rules
- Forbidden: other kernel languages and compilers (Triton, CUDA C/C++ via load_inline, cpp_extension,
  ctypes or NVRTC, CuPy, Numba, torch.compile, torch.jit), CUDA Graphs, calling the reference or the
  input generator, kernels imported from DSL kernel libraries, subprocesses, network access.
- A {dsl_title} step that can be skipped while the outputs stay correct is decorative: the submission fails.
- Correctness: 5 fresh random draws; each float output must be within 3 x max(reference error vs a
  float64 run, dtype epsilon x max|float64 output|) of the float64 result; integer outputs exactly;
  shapes, dtypes, devices and container types must match; NaN fails.
- Speed: 10 warmup then 50 timed end-to-end calls on fresh inputs, including Python dispatch; the
  median is compared with the eager PyTorch reference timed the same way.
- Your sandbox has 2 CPU cores, 8 GB of memory, no network and no GPU: {dsl_title} compiles here, but
  kernels run only on the verifier's GPU. Use `submit` to send `kernel.py` to the verifier.

## Budget
{minutes} minutes of wall-clock time and at most {submissions} counted submissions for feedback. When
the attempt ends, your final `kernel.py` is verified once more and that verdict counts.

## Skill
Maintain `SKILL.md`: a natural-language skill recording what you learned — evidence-backed findings
(with the measurement behind each), how work is partitioned between eager PyTorch and the DSL, why
things failed, the conditions under which each finding applies, and open questions. No code,
commands or API instructions.
"""


def render_task(problem: Problem, dsl: str, budget: Budget | None = None, skill: str | None = None) -> str:
    """The instruction text an agent sees for ``problem`` in ``dsl``; a transferred skill goes last."""
    if dsl not in DSLS:
        raise KeyError(f"unknown DSL {dsl!r}; use one of {', '.join(DSLS)}")
    d, b = DSLS[dsl], budget or Budget()

    def describe(specs: dict[str, tuple[tuple[str | int, ...] | None, str]]) -> str:
        lines = []
        for name, (dims, dtype) in specs.items():
            if dims is None:
                lines.append(f"- `{name}`: Python scalar ({dtype})")
            else:
                shape = ", ".join(f"{a}={problem.workload[a]}" if isinstance(a, str) else str(a) for a in dims)
                lines.append(f"- `{name}`: {dtype} [{shape}]")
        return "\n".join(lines)

    inplace = f"; then update {', '.join(f'`{n}`' for n in problem.inplace)} in place" if problem.inplace else ""
    text = _TEMPLATE.format(
        problem_id=problem.id,
        name=problem.name,
        dsl_title=d.title,
        description=problem.description.strip(),
        signature=", ".join(problem.inputs),
        inputs=describe(problem.inputs),
        outputs=describe(problem.outputs) or "- (none: the operator only updates its inputs in place)",
        inplace_note=inplace,
        notes=f"\n## Notes\n{problem.notes.strip()}\n" if problem.notes.strip() else "",
        dsl_summary=d.summary,
        import_line=d.import_line,
        docs_index=d.docs_index,
        minutes=b.minutes,
        submissions=b.submissions,
    )
    if skill:
        text += "\n" + SKILL_HEADER + skill
    return text
