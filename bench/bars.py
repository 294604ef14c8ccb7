"""The bars of issues 19 and 40, each a ratio or a difference to what the same run measured (pure functions).

A noisy machine cannot pass or fail them by itself: every bar names the sections it is measured in, and when any
of them was sampled noisy (``bench/hygiene.py``) its verdict is ``noisy`` instead of pass or fail.

1. **our share of a pause / a resume**: Gatehouse p50 minus the library floor of the same run (``bench/floors.py``:
   the libraries alone, composed into pauses and resumes), at most 1 ms / 2 ms (issue 40, bar 3; issue 19 had 3 / 4);
   Gatehouse's p50s measured in the floors' rounds, the two taking turns. Against the floor of each library alone
   in a tight loop the share is never worse than round two's (:data:`ROUND_TWO_TIGHT_SHARE_MS`);
2. **throughput**: decisions/s at concurrency 20 (the held scenario) at least 0.75 (issue 40, bar 4; issue 19 had
   0.5) of the one-process library ceiling (from the composed pairs; the tight loops' shown beside it): the median
   over the held rounds of each round's rate over the ceiling measured right before it (:func:`round_ratios`); a
   result without those, each side the median of its section's rounds (:func:`median_of_rounds`);
3. **backlog** (one runtime holding 100, 1,000 and 10,000 paused conversations; ``scenarios.backlog``): pause and
   resume p50 at the largest backlog within 1.2x of the smallest, decisions/s within 0.9x, RSS at the largest
   under 300 MB, the first page of ``GET /approvals`` under 20 ms p50;
5. **quick restarts**: process start to the first pause served, at most the import floor of the same run (a fresh
   interpreter importing the google-adk, a2a-sdk and mcp modules the runtime imports) + 0.5 s;
6. **operator**: N Agents to Accepted under 60 s (judged at 2,000 or more), API requests per reconcile at most 8 +
   one per child kind added since the issue was filed (the kinds counted from
   ``operator/gatehouse_operator/builders.py``, less the six of ``OPERATOR_KINDS_AT_FILING``), 0 writes on a no-op
   resync.

4. **decisions on every channel as quick as A2A ones**: a REST decision to the tool having run within 1.2x of an A2A
   decision to the tool having run (p50, interleaved; ``scenarios.decision_paths``). The kubectl half
   (:func:`kubectl_bars`, ``bench/kubectl_path.py``): a ToolApproval patch to the tool having run over the emulated
   API, p50 < 100 ms; and the mirror "keeps up" with 10,000 ToolApprovals, read as: every one of them created, and
   the creation lag (pause answered to ToolApproval created) p99 under 2 s.

Issue 40's bars 1 and 2 (:func:`start_bars`): the median cold start to ready at most plain ADK's (the durable twin,
``adk_durable``, interleaved in the same run), RSS at rest at most its, RSS with 1,000 paused (the held section)
under 200 MB; with 10,000 paused under 300 MB is bar 3's backlog RSS.

Issue 40's bar 5 (:func:`control_plane_bars`): the Kubernetes bars above (kubectl, the mirror, Agents to Accepted,
requests per reconcile) with the same limits on the real control plane (``bench/kubectl_cp.py``,
``bench/operator_cp.py``), beside the emulator's; :func:`emulator_differences` sets the two runs' figures side by
side and marks each that differs by more than 2x.
"""

from __future__ import annotations

import ast
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["BACKLOG_FULL", "MIRROR_FULL", "OPERATOR_FULL", "backlog_bars", "build_bars", "channel_bars", "child_kinds",
           "control_plane_bars", "emulator_differences", "gateway_bars", "kubectl_bars", "median_of_rounds",
           "operator_bars", "restart_bar", "round_ratios", "share_bars", "start_bars", "throughput_bar"]

SHARE_PAUSE_MS, SHARE_RESUME_MS = 1.0, 2.0  # issue 40, bar 3
# Round two's shares against each library alone in a tight loop (run 20261126T114732Z): "never worse" (issue 40).
ROUND_TWO_TIGHT_SHARE_MS = {"pause": 2.99, "resume": 5.60}
THROUGHPUT_SHARE = 0.75  # issue 40, bar 4
START_RATIO, REST_RSS_RATIO = 1.0, 1.0  # issue 40, bars 1 and 2: at most plain ADK's
HELD_RSS_MB, HELD_FULL = 200.0, 1000  # issue 40, bar 2: RSS with 1,000 paused
ADK_TWIN = "adk_durable"  # plain ADK as Gatehouse runs it: to_a2a with tool confirmation and durable sessions
BACKLOG_LATENCY_RATIO, BACKLOG_RATE_RATIO = 1.2, 0.9
BACKLOG_RSS_MB, LISTING_MS = 300.0, 20.0
BACKLOG_FULL = 10_000  # the bars' largest backlog; a smaller run says at what count it judged
RESTART_MARGIN_S = 0.5
CHANNEL_RATIO, KUBECTL_MS = 1.2, 100.0
GATEWAY_PASSTHROUGH_RATIO, GATEWAY_DECISION_RATIO = 1.3, 1.2  # issue 38, "Speed"
MIRROR_FULL, MIRROR_LAG_MS = 10_000, 2000.0  # "the mirror keeps up with 10,000": all created, creation lag p99 < 2 s
OPERATOR_FULL, OPERATOR_SECONDS, OPERATOR_BASE_REQUESTS = 2000, 60.0, 8
# The child kinds when issue 19 was filed: its "at most 8" allows one more request per kind added since.
OPERATOR_KINDS_AT_FILING = ("Deployment", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount")
BUILDERS = Path(__file__).resolve().parents[1] / "operator" / "gatehouse_operator" / "builders.py"
# The one ClusterRoleBinding whose subjects the operator keeps for every Agent (its runtime's TokenReview right): not a
# child built per Agent, but written for Agents (a share of a patch each, the group commit), so counted as a kind.
TOKENREVIEW = BUILDERS.with_name("tokenreview.py")


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _get(data: Mapping[str, Any] | None, *keys: str) -> float | None:
    value: Any = data
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return _num(value)


def _bar(key: str, name: str, value: float | None, limit: str, ok: bool | None, sections: tuple[str, ...],
         noisy: list[str], measured: str = "", reason: str = "") -> dict[str, Any]:
    """One bar: ``verdict`` is pass / fail, ``noisy`` when one of its sections was (then no pass, no fail), or
    None when it was not measured (``reason``)."""
    hit = [s for s in sections if s in noisy]
    verdict: str | None
    if value is None or ok is None:
        verdict = None
        reason = reason or "not measured"
    elif hit:
        verdict = "noisy"
        reason = reason or f"noisy: {', '.join(hit)}"
    else:
        verdict = "pass" if ok else "fail"
    return {"key": key, "bar": name, "value": None if value is None else round(value, 3), "limit": limit,
            "measured": measured, "sections": list(sections), "verdict": verdict, "reason": reason}


def share_bars(latency: Mapping[str, Any] | None, floors: Mapping[str, Any] | None, noisy: list[str]) -> list[dict[str, Any]]:
    """Bar 1: Gatehouse p50 minus the same run's library floor, pause <= 1 ms and resume <= 2 ms; then, for each, the
    share against the tight loops' floor no worse than round two's. Gatehouse's p50s are those measured in the floors'
    own rounds (``floors["gatehouse"]``: the two taking turns, see ``bench/floors.py``); a result written before they
    were gives the latency section's."""
    ours = floors.get("gatehouse") if isinstance(floors, Mapping) else None
    source, sections = (ours, ("floors",)) if isinstance(ours, Mapping) else (latency, ("floors", "latency"))
    out, against_tight = [], []
    for phase, floor_key, limit in (("pause", "pause_floor_ms", SHARE_PAUSE_MS),
                                    ("resume", "resume_floor_ms", SHARE_RESUME_MS)):
        p50, floor = _get(source, f"{phase}_ms", "p50"), _get(floors, floor_key)
        tight = _get(floors, "tight", floor_key)
        share = None if p50 is None or floor is None else p50 - floor
        out.append(_bar(f"share_{phase}", f"our share of a {phase}: p50 - library floor (ms)", share, f"<= {limit:g} ms",
                        None if share is None else share <= limit, sections, noisy,
                        measured="" if share is None else f"{p50:.2f} - {floor:.2f} ms"
                        + (" (in the floors' rounds)" if source is ours else "")
                        + ("" if tight is None or p50 is None else f"; each library alone in a loop: floor {tight:.2f} ms, "
                                                    f"share {p50 - tight:.2f} ms")))
        was = ROUND_TWO_TIGHT_SHARE_MS[phase]
        tight_share = None if p50 is None or tight is None else p50 - tight
        against_tight.append(_bar(f"share_{phase}_tight", f"our share of a {phase} against each library alone in a "
                                  "loop (ms)", tight_share, f"<= {was:g} ms (round two's)",
                                  None if tight_share is None else tight_share <= was, sections, noisy,
                                  measured="" if tight_share is None else f"{p50:.2f} - {tight:.2f} ms",
                                  reason="" if tight_share is not None or p50 is None
                                  else "the tight loops were not measured"))
    return out + against_tight


def median_of_rounds(data: Mapping[str, Any] | None, rounds_key: str, key: str) -> tuple[float | None, int]:
    """The median of the rounds under ``rounds_key`` and how many there were; a result without rounds (written
    before they were measured) gives ``key`` as one round."""
    rounds = [v for v in ((data or {}).get(rounds_key) or []) if _num(v) is not None]
    if rounds:
        return float(statistics.median(rounds)), len(rounds)
    value = _get(data, key)
    return value, 0 if value is None else 1


def round_ratios(held: Mapping[str, Any] | None) -> list[tuple[float, float]]:
    """The held section's rounds paired with the library ceiling measured right beside each (``scenarios.
    paused_then_decided``'s ``decisions_per_second_ceiling_rounds``): ``[(decisions/s, ceiling), ...]`` in round
    order; empty for a result without them (written before they were measured) or whose two lists do not pair up."""
    rates = list((held or {}).get("decisions_per_second_rounds") or [])
    ceilings = list((held or {}).get("decisions_per_second_ceiling_rounds") or [])
    pairs = [(_num(r), _num(c)) for r, c in zip(rates, ceilings, strict=False)]
    if not ceilings or len(rates) != len(ceilings) or any(r is None or not c or c < 0 for r, c in pairs):
        return []
    return [(float(r or 0), float(c or 0)) for r, c in pairs]


def throughput_bar(held: Mapping[str, Any] | None, floors: Mapping[str, Any] | None, noisy: list[str]) -> dict[str, Any]:
    """Bar 2 (issue 40's bar 4): decisions/s at concurrency 20 over the one-process library ceiling, at least 0.75.

    Both sides from the same minute of the machine: the median over the held section's rounds of (the round's
    decisions/s / the ceiling measured immediately before it, :func:`round_ratios`), so the machine's speed drifting
    between sections moves neither. A result without those ceilings (written before 2026-11-27's round three) is
    judged as it was then: the median of the held rounds over the median of the floors' ceiling rounds, measured
    minutes apart. ``measured`` says which; the floors' ceiling and the tight loops' ratio are shown beside."""
    rate, rate_rounds = median_of_rounds(held, "decisions_per_second_rounds", "decisions_per_second")
    ceiling, ceiling_rounds = median_of_rounds(floors, "decisions_per_second_ceiling_rounds",
                                               "decisions_per_second_ceiling")
    tight, _ = median_of_rounds((floors or {}).get("tight"), "decisions_per_second_ceiling_rounds",
                                "decisions_per_second_ceiling")
    concurrency = int(_get(held, "concurrency") or 20)
    name = f"decisions/s at concurrency {concurrency} / library ceiling"
    beside_tight = ("" if rate is None or not tight
                    else f"; each library alone in a loop: {rate:.1f}/s of {tight:.1f}/s = {rate / tight:.3f}")
    paired = round_ratios(held)
    if paired:
        ratios = [r / c for r, c in paired]
        value = float(statistics.median(ratios))
        each = ", ".join(f"{r:.1f}/{c:.1f} = {r / c:.3f}" for r, c in paired)
        apart = "" if rate is None or not ceiling else (f"; the sections' medians apart: {rate:.1f}/s of the floors' "
                                                        f"{ceiling:.1f}/s = {rate / ceiling:.3f}")
        return _bar("throughput", name, value, f">= {THROUGHPUT_SHARE:g}", value >= THROUGHPUT_SHARE, ("held",), noisy,
                    measured=f"median of {len(paired)} rounds, each beside its own ceiling: {each}" + apart + beside_tight)
    ratio = None if rate is None or not ceiling else rate / ceiling
    return _bar("throughput", name, ratio,
                f">= {THROUGHPUT_SHARE:g}", None if ratio is None else ratio >= THROUGHPUT_SHARE, ("floors", "held"), noisy,
                measured="" if ratio is None or ceiling is None else
                f"{rate:.1f}/s of {ceiling:.1f}/s (medians of {rate_rounds} and {ceiling_rounds} rounds, the sections apart: "
                f"no ceiling beside each held round in this result)" + beside_tight)


def backlog_bars(backlog: Mapping[str, Any] | None, noisy: list[str]) -> list[dict[str, Any]]:
    """Bar 3: the largest backlog against the smallest (pause, resume, decisions/s), RSS and listing at the largest."""
    steps = list((backlog or {}).get("steps") or [])
    reason = (backlog or {}).get("reason") or ("" if len(steps) >= 2 else "fewer than two backlog sizes measured")
    first, last = (steps[0], steps[-1]) if len(steps) >= 2 else ({}, {})
    small, large = int(first.get("backlog") or 0), int(last.get("backlog") or 0)
    at = f" (at {large:,}; the bar is at {BACKLOG_FULL:,})" if large and large < BACKLOG_FULL else ""
    span = f"{large:,} / {small:,}" if large else "largest / smallest"
    sections = ("backlog",)
    out = []
    for phase in ("pause", "resume"):
        a, b = _get(last, f"{phase}_ms", "p50"), _get(first, f"{phase}_ms", "p50")
        ratio = None if a is None or not b else a / b
        out.append(_bar(f"backlog_{phase}", f"backlog: {phase} p50 at {span}", ratio, f"<= {BACKLOG_LATENCY_RATIO:g}x",
                        None if ratio is None else ratio <= BACKLOG_LATENCY_RATIO, sections, noisy,
                        measured="" if ratio is None else f"{a:.2f} / {b:.2f} ms", reason=reason))
    a, b = _get(last, "decisions_per_second"), _get(first, "decisions_per_second")
    ratio = None if a is None or not b else a / b
    out.append(_bar("backlog_decisions", f"backlog: decisions/s at {span}", ratio, f">= {BACKLOG_RATE_RATIO:g}x",
                    None if ratio is None else ratio >= BACKLOG_RATE_RATIO, sections, noisy,
                    measured="" if ratio is None else f"{a:.1f} / {b:.1f}/s", reason=reason))
    rss = _get(last, "rss_mb")
    out.append(_bar("backlog_rss", f"backlog: RSS with {large:,} paused (MB){at}", rss, f"< {BACKLOG_RSS_MB:g} MB",
                    None if rss is None else rss < BACKLOG_RSS_MB, sections, noisy, reason=reason))
    listing = _get(last, "listing_ms", "p50")
    out.append(_bar("backlog_listing", f"backlog: GET /approvals first page p50 at {large:,} (ms)", listing,
                    f"< {LISTING_MS:g} ms", None if listing is None else listing < LISTING_MS, sections, noisy,
                    reason=reason))
    return out


def channel_bars(decisions: Mapping[str, Any] | None, noisy: list[str]) -> list[dict[str, Any]]:
    """Bar 4: REST decision to the tool having run over A2A's, p50, at most 1.2x; the kubectl half, not measured."""
    rest, a2a = _get(decisions, "rest_to_tool_ms", "p50"), _get(decisions, "a2a_to_tool_ms", "p50")
    ratio = None if rest is None or not a2a else rest / a2a
    kubectl = _bar("kubectl", "kubectl: ToolApproval patch to the tool having run p50 (ms)", None, f"< {KUBECTL_MS:g} ms",
                   None, ("decisions",), noisy,
                   reason="not measured by the bench yet (the runtime's ToolApproval mirror against the emulated API)")
    return [kubectl, _bar("rest_vs_a2a", "REST decision to tool ran / A2A decision to tool ran (p50)", ratio,
                          f"<= {CHANNEL_RATIO:g}x", None if ratio is None else ratio <= CHANNEL_RATIO, ("decisions",),
                          noisy, measured="" if ratio is None else f"{rest:.2f} / {a2a:.2f} ms")]


def kubectl_bars(kubectl: Mapping[str, Any] | None, noisy: list[str]) -> list[dict[str, Any]]:
    """Bar 4's kubectl half (``bench/kubectl_path.py``): a ToolApproval patch to the tool having run p50 < 100 ms, and
    the mirror keeping up with ``MIRROR_FULL`` ToolApprovals: all created, creation lag p99 < 2 s (a smaller run says
    at what count it judged)."""
    k = kubectl or {}
    reason = str(k.get("reason") or "")
    patch = k.get("patch") or {}
    p50, p90 = _get(patch, "kubectl_to_tool_ms", "p50"), _get(patch, "kubectl_to_tool_ms", "p90")
    a2a = _get(patch, "a2a_to_tool_ms", "p50")
    measured = "" if p50 is None else f"p90 {p90:g} ms" + ("" if a2a is None else f"; A2A on the same runtime p50 {a2a:g} ms")
    out = [_bar("kubectl", "kubectl: ToolApproval patch to the tool having run p50 (ms)", p50, f"< {KUBECTL_MS:g} ms",
                None if p50 is None else p50 < KUBECTL_MS, ("kubectl",), noisy, measured=measured,
                reason=reason)]
    mirror = k.get("mirror") or {}
    held = int(_get(mirror, "held") or _get(k, "held") or 0)
    p99, mirrored = _get(mirror, "lag_ms", "p99"), _get(mirror, "mirrored")
    paused = _get(mirror, "paused")
    at = f" (the bar is at {MIRROR_FULL:,})" if held and held < MIRROR_FULL else ""
    ok = None if p99 is None or mirrored is None or paused is None else (mirrored >= paused and p99 < MIRROR_LAG_MS)
    seconds = _get(mirror, "all_mirrored_seconds")
    detail = "" if p99 is None else (f"{int(mirrored or 0):,}/{int(paused or 0):,} created, p50 "
                                     f"{_get(mirror, 'lag_ms', 'p50')} ms, all in "
                                     f"{'—' if seconds is None else f'{seconds:g} s'}")
    out.append(_bar("mirror_lag", f"mirror: ToolApproval creation lag p99 at {held:,} paused (ms){at}", p99,
                    f"all created, p99 < {MIRROR_LAG_MS:g} ms", ok, ("mirror",), noisy, measured=detail,
                    reason=reason or ("" if mirror else "not run (--mirror-held 0)" if k else "")))
    return out


def gateway_bars(gateway: Mapping[str, Any] | None, noisy: list[str]) -> list[dict[str, Any]]:
    """Issue 38's speed (``bench/gateway_path.py``): an ungated call through the MCP gateway at most 1.3x a direct call,
    and a REST decision on a held call to the client's result at most 1.2x an A2A decision to its result, p50s
    measured interleaved in one section. Beside the first, not judged: the same call through a forwarding proxy that
    does nothing else (the hop's own floor; results from before it was measured have none)."""
    g = gateway or {}
    reason = str(g.get("reason") or "")
    out = []
    for key, name, ratio_key, top, bottom, limit in (
        ("gateway_passthrough", "gateway: ungated call through it / direct call (p50)", "passthrough_ratio",
         "through_ms", "direct_ms", GATEWAY_PASSTHROUGH_RATIO),
        ("gateway_decision", "gateway: REST decision to the client's result / A2A decision to its result (p50)",
         "decision_ratio", "gateway_decision_ms", "a2a_decision_ms", GATEWAY_DECISION_RATIO),
    ):
        ratio, a, b = _get(g, ratio_key), _get(g, top, "p50"), _get(g, bottom, "p50")
        measured = "" if a is None or b is None else f"{a:g} / {b:g} ms"
        hop, hop_ratio = _get(g, "bare_ms", "p50"), _get(g, "bare_ratio")
        if key == "gateway_passthrough" and measured and hop is not None and hop_ratio is not None:
            measured += f"; the hop alone (bench/bare_proxy.py): {hop:g} ms, {hop_ratio:g}x"
        out.append(_bar(key, name, ratio, f"<= {limit:g}", None if ratio is None else ratio <= limit, ("gateway",),
                        noisy, measured=measured, reason=reason or ("" if g else "not run")))
    return out


def restart_bar(restart: Mapping[str, Any] | None, noisy: list[str]) -> dict[str, Any]:
    """Bar 5: process start to the first pause served minus the same run's import floor, at most 0.5 s."""
    first, floor = _get(restart, "first_pause_seconds"), _get(restart, "import_floor_seconds")
    over = None if first is None or floor is None else first - floor
    return _bar("restart", "restart: start to first pause - import floor (s)", over, f"<= {RESTART_MARGIN_S:g} s",
                None if over is None else over <= RESTART_MARGIN_S, ("restart",), noisy,
                measured="" if over is None else f"{first:.2f} - {floor:.2f} s",
                reason=(restart or {}).get("reason", ""))


def start_bars(gatehouse: Mapping[str, Any] | None, adk: Mapping[str, Any] | None,
               noisy: list[str]) -> list[dict[str, Any]]:
    """Issue 40's bars 1 and 2 from the cold starts (each target's median, the targets interleaved in one run) and the
    held section: ready at most plain ADK's, RSS at rest at most its, RSS with 1,000 paused under 200 MB."""
    ours, twin = (gatehouse or {}).get("cold_start") or {}, (adk or {}).get("cold_start") or {}
    samples = min(len(ours.get("samples") or []), len(twin.get("samples") or []))
    missing = "" if ours and twin else ("plain ADK's cold starts were not measured" if ours else "not measured")
    out = []
    for key, name, field, limit, unit in (
        ("start", "start: cold start to ready / plain ADK's (medians)", "ready_seconds", START_RATIO, "s"),
        ("rest_rss", "memory: RSS at rest / plain ADK's (medians)", "rss_at_rest_mb", REST_RSS_RATIO, "MB"),
    ):
        a, b = _get(ours, field), _get(twin, field)
        ratio = None if a is None or not b else a / b
        out.append(_bar(key, name, ratio, f"<= {limit:g}", None if ratio is None else ratio <= limit, ("cold_start",),
                        noisy, measured="" if ratio is None else f"{a:g} / {b:g} {unit}, {samples} interleaved "
                        f"sample{'' if samples == 1 else 's'} each", reason=missing))
    held = (gatehouse or {}).get("held") or {}
    paused, rss = int(_get(held, "paused") or 0), _get(held, "rss_paused_mb")
    full = paused >= HELD_FULL
    out.append(_bar("held_rss", f"memory: RSS with {paused:,} paused (MB)", rss,
                    f"< {HELD_RSS_MB:g} MB" + ("" if full else f" (judged at {HELD_FULL:,})"),
                    None if rss is None or not full else rss < HELD_RSS_MB, ("held",), noisy,
                    reason="not measured" if rss is None else "" if full
                    else f"{paused:,} paused: judged at {HELD_FULL:,} (make bench)"))
    return out


def child_kinds(builders: Path = BUILDERS, shared: Path | None = TOKENREVIEW) -> list[str]:
    """The kinds of the objects the operator writes for an Agent: every dict literal with ``apiVersion`` and a
    constant ``kind`` in a ``build_*`` function of ``builders.py`` (references such as ``roleRef`` and ``subjects``
    carry no ``apiVersion``), distinct, in source order; then the shared TokenReview binding's kind (the constant
    ``BINDING`` of ``tokenreview.py``), which the operator patches for Agents without building it."""
    tree = ast.parse(builders.read_text())
    kinds: list[str] = []
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("build_")):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, ast.Dict):
                continue
            keys = {k.value: v for k, v in zip(node.keys, node.values, strict=True)
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            kind = keys.get("kind")
            if "apiVersion" in keys and isinstance(kind, ast.Constant) and isinstance(kind.value, str):
                if kind.value not in kinds:
                    kinds.append(kind.value)
    if shared is not None:
        for node in ast.parse(shared.read_text()).body:
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "BINDING" for t in node.targets)
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                    and node.value.value not in kinds):
                kinds.append(node.value.value)
    return kinds


def operator_bars(operator: Mapping[str, Any], kinds: list[str], noisy: list[str]) -> list[dict[str, Any]]:
    """Bar 6 on the operator rows: Agents to Accepted (judged at 2,000+), requests per reconcile, no-op writes."""
    reason = "" if operator.get("available") else str(operator.get("reason") or "not run")
    agents = int(operator.get("agents") or 0)
    sections = ("operator",)
    seconds = _get(operator, "agents_to_accepted_seconds")
    full = agents >= OPERATOR_FULL
    accepted = _bar("operator_accepted", f"operator: {agents:,} Agents to Accepted (s)", seconds,
                    f"< {OPERATOR_SECONDS:g} s" + ("" if full else f" (judged at {OPERATOR_FULL:,})"),
                    None if seconds is None or not full else seconds < OPERATOR_SECONDS, sections, noisy,
                    reason=reason or ("" if full else f"{agents:,} Agents: judged at {OPERATOR_FULL:,} (make bench)"))
    per = _get(operator, "api_requests_per_reconcile")
    added = [k for k in kinds if k not in OPERATOR_KINDS_AT_FILING]
    limit = OPERATOR_BASE_REQUESTS + len(added)
    named = f" ({', '.join(added)})" if added else ""
    requests = _bar("operator_requests", "operator: API requests per reconcile", per,
                    f"<= {OPERATOR_BASE_REQUESTS} + {len(added)} child kinds added since the issue{named} = {limit}",
                    None if per is None else per <= limit, sections, noisy, measured=", ".join(kinds), reason=reason)
    writes = _get(operator, "writes_on_noop_resync")
    # a count that must be 0 whatever the load: judged on a noisy machine too
    noop = _bar("operator_noop_writes", "operator: writes on a no-op resync", writes, "0",
                None if writes is None else writes == 0, (), noisy, reason=reason)
    return [accepted, requests, noop]


# Issue 40, bar 5: the Kubernetes rows on the real control plane, each section named after its emulator twin.
CONTROL_PLANE_SECTIONS = {"kubectl_cp": "kubectl", "mirror_cp": "mirror", "operator_cp": "operator"}
CONTROL_PLANE_LABEL = "real control plane: "
DIFFERENCE_FACTOR = 2.0  # a real-control-plane figure this many times the emulator's (or less than 1/x) is noted


def control_plane_bars(kubectl: Mapping[str, Any] | None, operator: Mapping[str, Any] | None, kinds: list[str],
                       noisy: list[str]) -> list[dict[str, Any]]:
    """Issue 40's bar 5: the emulator's Kubernetes bars, with the same limits, on what the real control plane measured
    (``bench/kubectl_cp.py``, ``bench/operator_cp.py``): the kubectl patch to the tool having run p50 < 100 ms, the
    mirror's creation lag p99 < 2 s with every ToolApproval created (judged at 10,000), N Agents to Accepted < 60 s
    (judged at 2,000) and requests per reconcile within the same limit. Keys end in ``_cp``, names start with "real
    control plane: ", sections are the ``*_cp`` ones. The no-op resync is not measured there: no bar."""
    inner = [CONTROL_PLANE_SECTIONS[s] for s in noisy if s in CONTROL_PLANE_SECTIONS]
    back = {v: k for k, v in CONTROL_PLANE_SECTIONS.items()}
    k = dict(kubectl) if kubectl else {"reason": "not run"}
    op = dict(operator) if operator else {"available": False, "reason": "not run", "agents": 0}
    judged = [*kubectl_bars(k, inner), *operator_bars(op, kinds, inner)[:2]]
    out = []
    for b in judged:
        sections = [back[x] for x in b["sections"]]
        reason = f"noisy: {', '.join(s for s in sections if s in noisy)}" if b["verdict"] == "noisy" else b["reason"]
        out.append({**b, "key": f"{b['key']}_cp", "bar": CONTROL_PLANE_LABEL + b["bar"], "sections": sections,
                    "reason": reason})
    return out


# (figure, where it is in the emulator's results, where in the real control plane's): ``kubectl.``/``operator.``
# paths into ``results.gatehouse.kubectl[_cp]`` and ``operator[_cp]``.
COMPARED = (
    ("operator: Agents to Accepted (s)", "operator.agents_to_accepted_seconds"),
    ("operator: Agents created (s)", "operator.create_seconds"),
    ("operator: API requests per reconcile", "operator.api_requests_per_reconcile"),
    ("kubectl: patch -> tool ran p50 (ms)", "kubectl.patch.kubectl_to_tool_ms.p50"),
    ("kubectl: patch -> tool ran p90 (ms)", "kubectl.patch.kubectl_to_tool_ms.p90"),
    ("kubectl: PATCH round trip p50 (ms)", "kubectl.patch.patch_roundtrip_ms.p50"),
    ("kubectl: PATCH -> status Approved p50 (ms)", "kubectl.patch.patch_to_approved_status_ms.p50"),
    ("kubectl: pause -> Pending seen p50 (ms)", "kubectl.patch.pause_to_pending_ms.p50"),
    ("kubectl: A2A decision -> tool ran p50 (ms), same runtime", "kubectl.patch.a2a_to_tool_ms.p50"),
    ("kubectl: patch -> tool ran p50 with the mirror's N held (ms)", "kubectl.patch_at_held.kubectl_to_tool_ms.p50"),
    ("mirror: creation lag p50 (ms)", "kubectl.mirror.lag_ms.p50"),
    ("mirror: creation lag p99 (ms)", "kubectl.mirror.lag_ms.p99"),
    ("mirror: paused per second", "kubectl.mirror.fill_per_second"),
    ("mirror: all created (s after the first pause)", "kubectl.mirror.all_mirrored_seconds"),
    ("mirror: runtime's API requests per ToolApproval", "kubectl.mirror.api_requests_per_approval"),
)


def emulator_differences(emulator: Mapping[str, Any], real: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each figure of :data:`COMPARED` measured on both, side by side: ``{"figure", "emulator", "real", "ratio"
    (real / emulator), "differs"}``, ``differs`` when the ratio is above ``DIFFERENCE_FACTOR`` or below its inverse.
    ``emulator`` and ``real`` are ``{"kubectl": ..., "operator": ...}``; a figure missing on either side has ratio None
    and is not compared."""
    out = []
    for figure, path in COMPARED:
        a, b = _get(emulator, *path.split(".")), _get(real, *path.split("."))
        ratio = None if a is None or b is None or a <= 0 or b < 0 else b / a
        out.append({"figure": figure, "emulator": a, "real": b, "ratio": None if ratio is None else round(ratio, 2),
                    "differs": ratio is not None and (ratio > DIFFERENCE_FACTOR or ratio < 1 / DIFFERENCE_FACTOR)})
    return out


def build_bars(gatehouse: Mapping[str, Any] | None, floors: Mapping[str, Any] | None, operator: Mapping[str, Any],
               noisy: list[str], kinds: list[str] | None = None,
               operator_cp: Mapping[str, Any] | None = None,
               adk: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every bar, in the issue's order, from one run's results (``gatehouse``: the default target's; ``adk``: plain
    ADK's, :data:`ADK_TWIN`); issue 40's start and memory bars after issue 19's first three, the real control plane's
    (issue 40, bar 5) last."""
    g = gatehouse or {}
    floors = floors if floors and "pause_floor_ms" in floors else None
    kinds = child_kinds() if kinds is None else kinds
    return [
        *share_bars(g.get("latency"), floors, noisy),
        throughput_bar(g.get("held"), floors, noisy),
        *backlog_bars(g.get("backlog"), noisy),
        *start_bars(g, adk, noisy),
        *kubectl_bars(g.get("kubectl"), noisy),  # replaces channel_bars' kubectl placeholder
        *[b for b in channel_bars(g.get("decisions"), noisy) if b["key"] != "kubectl"],
        restart_bar(g.get("restart"), noisy),
        *gateway_bars(g.get("gateway"), noisy),
        *operator_bars(operator, kinds, noisy),
        *control_plane_bars(g.get("kubectl_cp"), operator_cp, kinds, noisy),
    ]
