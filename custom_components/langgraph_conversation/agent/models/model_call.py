"""One model answer, streamed: the main model with its retries, then the fallback.

Every answer goes through here: a conversation turn's model node (graph/graph.py) and a task's
one-shot call (one_shot.py) alike, so both retry and fall back by the same rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import aclosing
import logging
import time
from typing import Any

from langchain_core.runnables import Runnable

from ..events import TextDelta
from .answer import ANSWER_TOO_SLOW, YIELD_INTERVAL, AnswerBuilder, AnswerLimitExceeded
from .chat import answer_stream
from .error_kinds import classify_error, is_retryable, redacted_error, retry_delay
from .roles import RoleModel, falls_back

_LOGGER = logging.getLogger(__name__)

# The models that may answer, in order (the main model, then the fallback); the role is
# None when the caller has no roles (the main model then does all).
type AnsweringModels = Sequence[tuple[RoleModel | None, Runnable]]


async def stream_with_fallback(
    models: AnsweringModels,
    prompt: list[Any],
    write: Callable[[Any], None],
    *,
    retries: int,
    deadline: float | None,
) -> tuple[AnswerBuilder, RoleModel | None]:
    """Stream the answer: the main model with its retries, then the fallback.

    Only failures before the first word are tried again, on the main model if they may
    pass (rate limit, 5xx, dropped connection), else on the fallback if one is set (also
    after a timeout). Once words were spoken, a retry would repeat them: never. An answer
    past its bounds (answer.py: too long, or still streaming at its `deadline` in
    seconds) ends the call: another attempt would most likely do the same. Every piece
    of text goes to `write` as a TextDelta as it arrives.
    """
    for index, (role_model, model) in enumerate(models):
        attempts = (retries if index == 0 else 0) + 1
        for attempt in range(attempts):
            answer = AnswerBuilder()
            streamed = False
            timeout = asyncio.timeout(deadline)
            try:
                async with timeout, aclosing(answer_stream(model, prompt)) as chunks:
                    paused = time.perf_counter()
                    async for chunk in chunks:
                        if text := answer.add(chunk):
                            write(TextDelta(text))
                            if not streamed:
                                # Chunks already buffered would otherwise all be read
                                # before the consumer runs once: let the first words
                                # reach the ChatLog (and TTS) now.
                                await asyncio.sleep(0)
                                paused = time.perf_counter()
                            streamed = True
                        if time.perf_counter() - paused > YIELD_INTERVAL:
                            # A long burst of buffered chunks is read without waiting
                            # for the network: give the loop a turn now and then.
                            await asyncio.sleep(0)
                            paused = time.perf_counter()
            except AnswerLimitExceeded:
                raise
            except Exception as err:  # noqa: BLE001  retried, passed on, or raised redacted
                if timeout.expired():
                    raise AnswerLimitExceeded(
                        ANSWER_TOO_SLOW,
                        f"the answer was still streaming after {deadline:g} s",
                    ) from None
                # Only a redacted copy leaves: LangGraph would store the original (whose
                # text may echo an API key) in threads.db.
                if streamed:
                    raise redacted_error(err) from None
                if attempt < attempts - 1 and is_retryable(err):
                    delay = retry_delay(err, attempt)
                    _LOGGER.info(
                        "Model call failed (%s), retrying in %.1f s", classify_error(err), delay
                    )
                    await asyncio.sleep(delay)
                    continue
                if index == len(models) - 1 or not falls_back(err):
                    raise redacted_error(err) from None
                next_model = models[index + 1][0]
                _LOGGER.warning(
                    "The main model failed (%s); the fallback model %s answers",
                    classify_error(err),
                    next_model.name if next_model else "",
                )
                break
            else:
                return answer, role_model
    raise AssertionError("unreachable: the last model's failure is raised")
