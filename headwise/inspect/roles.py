"""Head roles derived from the statistics, each with the numbers behind it.

A head may have several roles (listed strongest first):

* ``previous`` / ``next``: at least ``positional`` of a word's attention (specials
  removed) goes to the previous / next word;
* one role per token category (``negation``, ``number``, ``domain`` ...): the head puts
  at least ``lift`` times the category's share of the keys on it, and at least
  ``min_mass`` of its attention on it in the texts that contain the category (averaging
  over texts without it, where no head can attend to it, would make a rare category's
  best head look idle);
* ``sink``: at least ``sink`` of a word's raw attention goes to special tokens;
* ``broad``: normalised entropy (entropy / log n, specials removed) of at least ``broad``
  — attention spread over the whole text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class RoleThresholds:
    """Where a statistic makes a role (see the module docstring)."""

    positional: float = 0.4
    lift: float = 2.0
    min_mass: float = 0.05
    sink: float = 0.5
    broad: float = 0.85

    def to_dict(self) -> dict[str, float]:
        """A JSON-serialisable dict."""
        return asdict(self)


def head_roles(stats: dict[str, Any], thresholds: RoleThresholds | None = None
               ) -> list[list[list[dict[str, Any]]]]:
    """The roles of every head.

    Args:
        stats: :meth:`HeadStatistics.result <headwise.inspect.stats.HeadStatistics.result>`.
        thresholds: the rules (default :class:`RoleThresholds`).

    Returns:
        ``roles[layer][head]``: a list of ``{"role", "score", "evidence"}`` (``score`` the
        statistic that made the role, relative to its threshold; ``evidence`` a sentence
        with the numbers), strongest first.
    """
    t = thresholds or RoleThresholds()
    words, raw = stats["views"]["words"], stats["views"]["raw"]
    layers, heads = len(words["rows"]), len(words["rows"][0])
    out: list[list[list[dict[str, Any]]]] = []
    for layer in range(layers):
        row = []
        for head in range(heads):
            roles = []

            def get(view, key, layer=layer, head=head):
                return view[key][layer][head]

            for name, key, label in (("previous", "prev", "previous"),
                                     ("next", "next", "next")):
                v = get(words, key)
                if v is not None and v >= t.positional:
                    roles.append({"role": name, "score": v / t.positional,
                                  "evidence": f"{v:.0%} of each word's attention goes to the "
                                              f"{label} word"})
            for cat, c in words["categories"].items():
                lift, share = c["lift"][layer][head], c["share"][layer][head]
                mass = c.get("mass_present", c["mass"])[layer][head]
                if lift is None or mass is None or share is None:
                    continue
                if lift >= t.lift and mass >= t.min_mass:
                    top = c["top_share"][layer][head]
                    roles.append({"role": cat, "score": lift / t.lift, "lift": lift,
                                  "evidence": f"{mass:.0%} of the attention on {cat} words "
                                              f"in texts that have them, which are {share:.0%} "
                                              f"of all keys (lift "
                                              f"{lift:.2f}); the strongest key is a {cat} "
                                              f"word for {top:.0%} of queries"})
            sink = get(raw, "special")
            if sink is not None and sink >= t.sink:
                roles.append({"role": "sink", "score": sink / t.sink,
                              "evidence": f"{sink:.0%} of each word's attention goes to "
                                          f"special tokens ([CLS]/[SEP])"})
            ent = get(words, "entropy_norm")
            if ent is not None and ent >= t.broad:
                roles.append({"role": "broad", "score": ent / t.broad,
                              "evidence": f"entropy is {ent:.0%} of the maximum (log n): "
                                          f"attention spread over the whole text"})
            roles.sort(key=lambda r: -r["score"])
            row.append(roles)
        out.append(row)
    return out


def heads_with_role(roles: list[list[list[dict[str, Any]]]], role: str
                    ) -> list[tuple[int, int]]:
    """(layer, head) of every head with ``role``."""
    return [(layer, head) for layer, row in enumerate(roles) for head, rs in enumerate(row)
            if any(r["role"] == role for r in rs)]
