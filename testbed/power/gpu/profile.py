"""Power/performance profiles: how a GPU's throughput and power draw depend on its power cap.

A profile is a small YAML file (``testbed/power/profiles/<name>.yaml``, or any path) with the
cap range the driver allows and measured or published points ``(cap_w, throughput_frac, draw_w)``:
at cap ``cap_w`` under a training load the GPU draws ``draw_w`` and trains at ``throughput_frac``
of its uncapped speed. Between points both are interpolated linearly; outside the range the cap is
clamped (a driver refuses caps outside [min_w, max_w], so the model does too).

Every shipped profile says where its numbers come from (``source``); ``testbed calibrate power``
measures one on a real GPU and writes the same format.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from testbed.errors import TestbedError


class ProfileError(TestbedError):
    """A power profile file is missing or malformed (the message names the file and field)."""


@dataclass(frozen=True)
class ProfilePoint:
    cap_w: float
    throughput_frac: float
    draw_w: float


@dataclass(frozen=True, eq=False)
class PowerProfile:
    name: str
    min_w: float
    max_w: float
    default_w: float
    idle_w: float
    points: tuple[ProfilePoint, ...]
    source: str = ""

    def __post_init__(self) -> None:
        where = f"power profile {self.name!r}"
        if not 0 <= self.min_w <= self.default_w <= self.max_w or self.max_w <= 0:
            raise ProfileError(f"{where}: need 0 <= min_w <= default_w <= max_w and max_w > 0")
        if self.idle_w < 0:
            raise ProfileError(f"{where}: idle_w must be >= 0")
        if len(self.points) < 2:
            raise ProfileError(f"{where}: points: need at least two (cap_w, throughput_frac, draw_w)")
        caps = [p.cap_w for p in self.points]
        if caps != sorted(caps) or len(set(caps)) != len(caps):
            raise ProfileError(f"{where}: points: cap_w must be strictly increasing")
        if caps[0] > self.min_w + 1e-9 or abs(caps[-1] - self.max_w) > 1e-9:
            raise ProfileError(f"{where}: points: must span [min_w, max_w] (first cap <= min_w, last cap == max_w)")
        for i, p in enumerate(self.points):
            if not 0 < p.throughput_frac <= 1 or p.draw_w < 0 or p.draw_w > p.cap_w + 1e-9:
                raise ProfileError(f"{where}: points[{i}]: need 0 < throughput_frac <= 1 and 0 <= draw_w <= cap_w")
        if abs(self.points[-1].throughput_frac - 1.0) > 1e-9:
            raise ProfileError(f"{where}: points: throughput_frac at max_w must be 1.0 (it is relative to uncapped)")
        for a, b in zip(self.points, self.points[1:]):
            if b.throughput_frac < a.throughput_frac or b.draw_w < a.draw_w:
                raise ProfileError(f"{where}: points: throughput_frac and draw_w must not fall as the cap rises")
        object.__setattr__(self, "_caps", tuple(caps))
        object.__setattr__(self, "_memo", {})

    # -- the model -------------------------------------------------------------------------------
    def clamp_w(self, cap_w: float) -> float:
        return min(self.max_w, max(self.min_w, cap_w))

    def _interp(self, cap_w: float, attr: str) -> float:
        key = (cap_w, attr)
        hit = self._memo.get(key)  # type: ignore[attr-defined]
        if hit is not None:
            return hit
        x = self.clamp_w(cap_w)
        caps = self._caps  # type: ignore[attr-defined]
        i = bisect.bisect_left(caps, x)
        if i == 0:
            v = getattr(self.points[0], attr)
        else:
            a, b = self.points[i - 1], self.points[min(i, len(caps) - 1)]
            w = (x - a.cap_w) / (b.cap_w - a.cap_w) if b.cap_w != a.cap_w else 1.0
            v = getattr(a, attr) + w * (getattr(b, attr) - getattr(a, attr))
        if len(self._memo) < 4096:  # type: ignore[attr-defined]
            self._memo[key] = v  # type: ignore[attr-defined]
        return v

    def throughput_frac(self, cap_w: float) -> float:
        """Training speed at ``cap_w`` relative to uncapped (1.0 at max_w)."""
        return self._interp(cap_w, "throughput_frac")

    def draw_w(self, cap_w: float) -> float:
        """Power the GPU draws under a training load when capped at ``cap_w``."""
        return self._interp(cap_w, "draw_w")

    def draw_at_frac_w(self, throughput_frac: float) -> float:
        """Power the GPU draws while training at ``throughput_frac`` of its uncapped speed: the
        profile read backwards (the lowest cap that gives that speed, then its draw). Below the
        slowest point: the draw at min_w; at or above 1: the draw at max_w."""
        pts = [ProfilePoint(self.min_w, self.throughput_frac(self.min_w), self.min_draw_w)] + \
            [p for p in self.points if p.cap_w > self.min_w]
        if throughput_frac <= pts[0].throughput_frac:
            return pts[0].draw_w
        for a, b in zip(pts, pts[1:]):
            if throughput_frac <= b.throughput_frac:
                w = (throughput_frac - a.throughput_frac) / (b.throughput_frac - a.throughput_frac)
                return a.draw_w + w * (b.draw_w - a.draw_w)
        return self.max_draw_w

    @property
    def max_draw_w(self) -> float:
        return self.points[-1].draw_w

    @property
    def min_draw_w(self) -> float:
        return self.draw_w(self.min_w)

    def cap_for_draw_w(self, budget_w: float) -> float:
        """The highest cap whose draw fits ``budget_w`` (min_w when even that does not fit)."""
        if budget_w >= self.max_draw_w:
            return self.max_w
        if budget_w <= self.min_draw_w:
            return self.min_w
        pts = [p for p in self.points if p.cap_w >= self.min_w]
        lo = ProfilePoint(self.min_w, self.throughput_frac(self.min_w), self.min_draw_w)
        for a, b in zip([lo] + pts, pts):
            if a.draw_w <= budget_w <= b.draw_w:
                if b.draw_w == a.draw_w:
                    return b.cap_w
                return a.cap_w + (budget_w - a.draw_w) / (b.draw_w - a.draw_w) * (b.cap_w - a.cap_w)
        return self.max_w  # pragma: no cover (draw is monotone and the ends are handled above)

    def to_dict(self) -> dict:
        return {
            "name": self.name, "min_w": self.min_w, "max_w": self.max_w, "default_w": self.default_w,
            "idle_w": self.idle_w, "source": self.source,
            "points": [[p.cap_w, p.throughput_frac, p.draw_w] for p in self.points],
        }

    @classmethod
    def linear(cls, name: str, max_w: float, idle_w: float = 0.0) -> "PowerProfile":
        """Throughput proportional to power from 0 to ``max_w`` (the pessimistic textbook model)."""
        return cls(name, 0.0, max_w, max_w, idle_w,
                   (ProfilePoint(0.0, 1e-9, 0.0), ProfilePoint(max_w, 1.0, max_w)),
                   source="linear model: throughput proportional to power (no measurement)")


def profile_from_dict(d: object, where: str) -> PowerProfile:
    if not isinstance(d, dict):
        raise ProfileError(f"{where}: expected a mapping")
    missing = [k for k in ("name", "min_w", "max_w", "idle_w", "points") if k not in d]
    if missing:
        raise ProfileError(f"{where}: missing field {missing[0]!r}")
    unknown = sorted(set(d) - {"name", "min_w", "max_w", "default_w", "idle_w", "points", "source", "measured"})
    if unknown:
        raise ProfileError(f"{where}: unknown field {unknown[0]!r}")
    try:
        pts = tuple(ProfilePoint(float(p[0]), float(p[1]), float(p[2])) for p in d["points"])
    except (TypeError, ValueError, IndexError, KeyError):
        raise ProfileError(f"{where}: points: each point must be [cap_w, throughput_frac, draw_w]") from None
    try:
        return PowerProfile(
            name=str(d["name"]), min_w=float(d["min_w"]), max_w=float(d["max_w"]),
            default_w=float(d.get("default_w", d["max_w"])), idle_w=float(d["idle_w"]), points=pts,
            source=str(d.get("source", "")),
        )
    except (TypeError, ValueError) as e:
        raise ProfileError(f"{where}: {e}") from None


def builtin_profiles() -> list[str]:
    root = resources.files("testbed.power") / "profiles"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def load_profile(name_or_path: str | Path) -> PowerProfile:
    """A shipped profile by name (``rtx4090``) or a YAML file by path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ProfileError(f"{path}: power profile file not found")
        text, where = path.read_text(), str(path)
    else:
        res = resources.files("testbed.power") / "profiles" / f"{name_or_path}.yaml"
        if not res.is_file():
            raise ProfileError(f"unknown power profile {str(name_or_path)!r}; shipped: {', '.join(builtin_profiles())}")
        text, where = res.read_text(), f"power profile {name_or_path}"
    from testbed.safe_yaml import YamlProblem, parse_yaml

    try:
        data = parse_yaml(text)  # hardened: duplicate keys, depth, alias bombs; never quotes the text
    except YamlProblem as e:
        at = f":{e.line}" if e.line else ""
        raise ProfileError(f"{where}{at}: {e.message}") from None
    return profile_from_dict(data, where)


def save_profile(profile: PowerProfile, path: Path, measured: dict | None = None) -> None:
    d = profile.to_dict()
    if measured:
        d["measured"] = measured
    path.write_text(yaml.safe_dump(d, sort_keys=False))
