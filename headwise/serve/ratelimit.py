"""A token bucket per API key: ``rate`` requests per second, ``burst`` at once.

Each key's bucket holds up to ``burst`` tokens and starts full; it gains ``rate`` tokens a
second, and a request takes one. A request that finds less than one token is refused, and
told how long until there is one (the service's ``Retry-After``, in whole seconds rounded
up). Over any window of ``t`` seconds a key is answered at most ``burst + rate * t`` times.

The clock is injectable, so that tests step it instead of sleeping. The buckets live in the
process: with ``--workers N`` each worker keeps its own, and a key may send up to N times
the rate in all.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: tokens short of one that still count as one: a request sent after exactly the wait it
#: was told must pass, whatever the rounding of ``now - then`` in floats
_EPSILON = 1e-9


class RateLimiter:
    """Token buckets by key.

    Args:
        rate: tokens (requests) added per second.
        burst: the bucket's size.
        clock: seconds, monotonic (default :func:`time.monotonic`); the attribute of
            that name may be replaced (a test's clock).

    Raises:
        ValueError: a rate that is not a positive finite number, or a burst below 1.
    """

    def __init__(self, rate: float, burst: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < rate < math.inf:
            raise ValueError(f"rate must be a positive number of requests per second, got "
                             f"{rate!r}")
        if not isinstance(burst, int) or burst < 1:
            raise ValueError(f"burst must be a positive integer, got {burst!r}")
        self.rate = float(rate)
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when)

    def take(self, key: str) -> float:
        """Spend one of ``key``'s tokens.

        Returns:
            0.0 when the request may go ahead (a token was spent); else the seconds until
            the bucket holds a token (nothing spent).
        """
        now = self.clock()
        tokens, then = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + max(0.0, now - then) * self.rate)
        if tokens >= 1.0 - _EPSILON:  # float rounding must not refuse a request on time
            self._buckets[key] = (max(0.0, tokens - 1.0), now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate

    @staticmethod
    def retry_after(seconds: float) -> int:
        """``Retry-After``'s whole seconds for a wait: rounded up, at least 1 (a wait a
        nanosecond over a whole second, float rounding, counts as that second)."""
        return max(1, math.ceil(seconds - 1e-9))
