"""Model calls through litellm, with retries on transient provider faults and per-call accounting.

Transient faults — rate limits (429), server errors (5xx), timeouts, dropped connections — are
retried (tenacity): after the time the provider asks for where it says (``retry-after-ms``,
``Retry-After`` in seconds or as a date, else the latest ``x-ratelimit-reset-*``), else with exponential
backoff and full jitter. A provider asking for more than ``backoff_max_s`` is not retried: the attempt
ends as ``infra_error`` and runs again on resume. Anything else (a bad key, an unknown model, a
malformed request) fails at once. Either way a call that cannot be completed raises
``ModelUnavailable``: an infrastructure failure, never the agent's.

Stopping: the request runs in a daemon thread while the caller waits in slices, so a stop (SIGTERM,
Ctrl-C) is honoured within a fraction of a second even while a request hangs or a retry waits: the
call raises ``KeyboardInterrupt`` and the abandoned request dies with the process or its timeout.

litellm is imported on first use (it takes seconds); its own retries and the OpenAI SDK's are
switched off so that every retry is ours and recorded.
"""

from __future__ import annotations

import dataclasses
import email.utils
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Context window assumed for models litellm has no information about.
DEFAULT_CONTEXT_TOKENS = 32_768

#: How often a waiting call looks at its stop flag.
_STOP_POLL_S = 0.1

#: OpenAI's reset durations: "1s", "6m0s", "20ms", "1h2m3.5s".
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}

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
    truncated_from_chars: int | None = None  # the reply's length where ``capped`` cut it

    def capped(self, max_chars: int, clean: Callable[[str], str] = lambda text: text) -> Completion:
        """This completion with its text passed through ``clean`` and cut to ``max_chars``."""
        text = clean(self.text)
        if len(text) <= max_chars:
            return dataclasses.replace(self, text=text)
        return dataclasses.replace(self, text=text[:max_chars], truncated_from_chars=len(text))

    def truncation(self) -> dict[str, int]:
        """The step field recording a cut, where there was one."""
        return {"truncated_from_chars": self.truncated_from_chars} if self.truncated_from_chars else {}

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


def retry_after_s(exc: BaseException) -> float | None:
    """How long the provider asks us to wait before the next request, from the failed response's headers:
    ``retry-after-ms``, ``Retry-After`` (seconds or an HTTP date), else the latest ``x-ratelimit-reset-*``
    (durations like ``6m0s``); None where it says nothing."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        if headers.get("retry-after"):
            value = headers["retry-after"].strip()
            try:
                return max(0.0, float(value))
            except ValueError:
                return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        pass  # a malformed header says nothing
    resets = [sum(float(n) * _UNIT_S[unit] for n, unit in _DURATION.findall(str(v)))
              for k, v in headers.items() if str(k).lower().startswith("x-ratelimit-reset")]  # fmt: skip
    return max(resets) if resets else None


class _WaitTooLong(Exception):
    """The provider asks for a longer wait than the agent's ``backoff_max_s``."""


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
        stopped: Callable[[], bool] = lambda: False,
    ) -> Completion:
        """One completion. ``time_left()`` caps each request's timeout: a request cut short by
        the attempt's deadline raises ``BudgetEnded`` (not retried). ``stopped()`` turning true while a
        request or a retry's wait is under way raises ``KeyboardInterrupt`` within ``_STOP_POLL_S``."""
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
                response = _cancellable(
                    lambda: litellm.completion(
                        model=cfg.model, messages=list(messages), timeout=timeout, num_retries=0, max_retries=0,
                        **kwargs,
                    ),
                    stopped,
                )  # fmt: skip
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

        backoff = tenacity.wait_random_exponential(multiplier=cfg.backoff_initial_s, max=cfg.backoff_max_s)

        def wait(state: tenacity.RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            asked = retry_after_s(exc) if exc is not None else None
            if asked is None:
                return float(backoff(state))
            if asked > cfg.backoff_max_s:
                raise _WaitTooLong(f"the provider asks to wait {asked:g} s (more than backoff_max_s "
                                   f"{cfg.backoff_max_s:g}) after {describe_error(exc) if exc else '?'}")  # fmt: skip
            return asked

        def sleep(seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                if stopped():
                    raise KeyboardInterrupt("stopped")
                time.sleep(min(_STOP_POLL_S, left))

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            stop=tenacity.stop_after_attempt(cfg.max_retries + 1),
            wait=wait,
            sleep=sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            response = retrying(request)
        except BudgetEnded:
            raise
        except _WaitTooLong as exc:
            raise ModelUnavailable(str(exc)) from exc
        except litellm.ContextWindowExceededError as exc:
            raise ContextOverflow(describe_error(exc)) from exc
        except Exception as exc:
            tries = "" if not is_transient(exc) else f" after {cfg.max_retries + 1} tries"
            raise ModelUnavailable(describe_error(exc) + tries) from exc
        return _completion(response, latency_s=last_request_s)


def _cancellable(call: Callable[[], Any], stopped: Callable[[], bool]) -> Any:
    """``call()`` in a daemon thread, waited for in slices; ``KeyboardInterrupt`` once ``stopped()`` (the
    thread is abandoned: a daemon thread does not hold up the process's exit)."""
    result: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()

    def target() -> None:
        try:
            result.put((True, call()))
        except BaseException as exc:
            result.put((False, exc))

    threading.Thread(target=target, name="model-request", daemon=True).start()
    while True:
        try:
            ok, value = result.get(timeout=_STOP_POLL_S)
        except queue.Empty:
            if stopped():
                raise KeyboardInterrupt("stopped") from None
            continue
        if ok:
            return value
        raise value


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
