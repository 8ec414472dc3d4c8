"""Model calls through litellm, with retries on transient provider faults and per-call accounting.

Transient faults — rate limits (429), server errors (5xx), timeouts, dropped connections — are
retried with exponential backoff and full jitter (tenacity). Anything else (a bad key, an unknown
model, a malformed request) fails at once. Either way a call that cannot be completed raises
``ModelUnavailable``: an infrastructure failure, never the agent's.

litellm is imported on first use (it takes seconds); its own retries and the OpenAI SDK's are
switched off so that every retry is ours and recorded.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Context window assumed for models litellm has no information about.
DEFAULT_CONTEXT_TOKENS = 32_768

#: Parameters the loop owns; a config passing them is refused by the config loader.
RESERVED_PARAMS = frozenset({"model", "messages", "timeout", "num_retries", "max_retries", "stream"})


def load_litellm() -> Any:
    """litellm, imported on first use. Its bundled price and context-window map is used instead of
    one fetched from the network at import: costs are then fixed by the installed litellm version."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class ModelUnavailable(Exception):
    """The model could not be reached or refused the request (after retries where they apply)."""


class ContextOverflow(Exception):
    """The provider says the request exceeds the model's context window."""


class BudgetEnded(Exception):
    """The attempt's time ran out while waiting for the model."""


@dataclass(frozen=True)
class ModelConfig:
    """One agent: a litellm model id and how to call it.

    ``params`` go to ``litellm.completion`` unchanged (temperature, max_tokens, top_p, api_base,
    reasoning_effort, ...). ``api_key_env`` names an environment variable holding the key, for
    providers whose key litellm would not find by itself. ``name`` labels the agent in events
    (default: the model id).
    """

    model: str
    params: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    api_key_env: str | None = None
    context_tokens: int | None = None
    request_timeout_s: float = 600.0
    max_retries: int = 6
    backoff_initial_s: float = 2.0
    backoff_max_s: float = 120.0

    @property
    def label(self) -> str:
        return self.name or self.model

    def missing_keys(self) -> list[str]:
        """Environment variables this agent needs for its credentials but lacks (litellm's view
        of the provider; a custom ``api_base`` may need none, so callers may only warn then)."""
        if self.api_key_env:
            return [] if os.environ.get(self.api_key_env) else [self.api_key_env]
        if "api_key" in self.params:
            return []
        litellm = load_litellm()

        return list(litellm.validate_environment(model=self.model).get("missing_keys") or [])

    def context_window(self) -> int:
        """The model's input window: configured, else litellm's model info, else a default."""
        if self.context_tokens:
            return self.context_tokens
        litellm = load_litellm()

        try:
            info = litellm.get_model_info(self.model)
        except Exception:  # litellm raises plain Exception subclasses for unmapped models
            return DEFAULT_CONTEXT_TOKENS
        window = info.get("max_input_tokens") or info.get("max_tokens")
        return int(window) if window else DEFAULT_CONTEXT_TOKENS


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    finish_reason: str | None
    latency_s: float
    response_model: str | None

    @property
    def tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


@dataclass(frozen=True)
class RetryNote:
    """A failed call that will be retried: what failed, how long it took, how long we wait."""

    attempt: int
    error: str
    request_s: float
    sleep_s: float


def describe_error(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    text = str(exc).replace("\n", " ")
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {text}"


def is_transient(exc: BaseException) -> bool:
    """Rate limits, 5xx, timeouts and connection faults: worth retrying."""
    litellm = load_litellm()

    if isinstance(exc, litellm.ContextWindowExceededError):
        return False
    transient = (
        litellm.RateLimitError, litellm.InternalServerError, litellm.ServiceUnavailableError,
        litellm.BadGatewayError, litellm.Timeout, litellm.APIConnectionError, ConnectionError, TimeoutError,
    )  # fmt: skip
    if isinstance(exc, transient):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)


def _is_timeout(exc: BaseException) -> bool:
    litellm = load_litellm()

    return isinstance(exc, litellm.Timeout | TimeoutError)


class ModelClient:
    """Calls one model; every call goes through ``complete``."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        time_left: Callable[[], float],
        on_retry: Callable[[RetryNote], None],
    ) -> Completion:
        """One completion. ``time_left()`` caps each request's timeout: a request cut short by
        the attempt's deadline raises ``BudgetEnded`` (not retried)."""
        litellm = load_litellm()
        import tenacity

        cfg = self.config
        kwargs = dict(cfg.params)
        if cfg.api_key_env:
            key = os.environ.get(cfg.api_key_env)
            if not key:
                raise ModelUnavailable(f"environment variable {cfg.api_key_env} (api_key_env of {cfg.label}) is unset")
            kwargs["api_key"] = key
        last_request_s = 0.0

        def request() -> Any:
            nonlocal last_request_s
            left = time_left()
            if left <= 0:
                raise BudgetEnded
            timeout = min(cfg.request_timeout_s, left)
            t0 = time.monotonic()
            try:
                response = litellm.completion(
                    model=cfg.model, messages=list(messages), timeout=timeout, num_retries=0, max_retries=0, **kwargs
                )
            except Exception as exc:
                last_request_s = time.monotonic() - t0
                if timeout < cfg.request_timeout_s and _is_timeout(exc):
                    raise BudgetEnded from exc
                raise
            last_request_s = time.monotonic() - t0
            return response

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            sleep = state.next_action.sleep if state.next_action else 0.0
            on_retry(RetryNote(state.attempt_number, describe_error(exc) if exc else "?", last_request_s, sleep))

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            stop=tenacity.stop_after_attempt(cfg.max_retries + 1),
            wait=tenacity.wait_random_exponential(multiplier=cfg.backoff_initial_s, max=cfg.backoff_max_s),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            response = retrying(request)
        except BudgetEnded:
            raise
        except litellm.ContextWindowExceededError as exc:
            raise ContextOverflow(describe_error(exc)) from exc
        except Exception as exc:
            tries = "" if not is_transient(exc) else f" after {cfg.max_retries + 1} tries"
            raise ModelUnavailable(describe_error(exc) + tries) from exc
        return _completion(response, latency_s=last_request_s)


def _completion(response: Any, *, latency_s: float) -> Completion:
    litellm = load_litellm()

    choice = response.choices[0]
    usage = getattr(response, "usage", None)
    cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
    if cost is None:
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # no price known for this model: the cost stays unknown, not zero
            cost = None
    return Completion(
        text=choice.message.content or "",
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        cost_usd=float(cost) if cost is not None else None,
        finish_reason=getattr(choice, "finish_reason", None),
        latency_s=latency_s,
        response_model=getattr(response, "model", None),
    )
