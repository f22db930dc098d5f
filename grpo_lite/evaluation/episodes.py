"""What a batch of episodes says that a batch of replies cannot: judged once, by the table of
:data:`rewards.diagnoses.DIAGNOSES` the live health rules read (``turn_limit``, ``tool_always_fails``, ``no_tool_calls``).

An episode is a samples.jsonl row's ``episode`` and ``ended`` (:func:`grpo_lite.monitor.samples.episode`); ``preview``
finds these in the episodes it plays before training.
"""

from __future__ import annotations

from typing import Any

from rewards.diagnoses import Finding, finding

from ..monitor.samples import is_tool_error


def tool_results(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each tool's results over the episodes, by the name the model called it by (text, or a list as the model was shown
    it: :func:`grpo_lite.monitor.samples.tool_result`)."""
    results: dict[str, list[Any]] = {}
    for row in rows:
        for turn in row["episode"]:
            if turn["turn"] == "tool":
                results.setdefault(turn["tool"], []).append(turn["result"])
    return results


def episode_findings(rows: list[dict[str, Any]], *, has_tools: bool) -> list[Finding]:
    """Findings only episodes have: every episode ended at the turn limit; a tool whose every call failed; and, where
    the rollouts had tools (``has_tools``), no episode that called one."""
    found = []
    if rows and all(row["ended"] == "turn limit" for row in rows):
        found.append(finding("turn_limit", f"all {len(rows)} episodes ended at the turn limit, their last call or environment turn unanswered"))
    for tool, results in tool_results(rows).items():
        if all(is_tool_error(result) for result in results):
            found.append(finding("tool_always_fails", f"{tool}: all {len(results)} of its calls failed, e.g. {results[0][:80]}"))
    if has_tools and rows and not any(turn.get("calls") for row in rows for turn in row["episode"]):
        found.append(finding("no_tool_calls", f"none of the {len(rows)} episodes called a tool"))
    return found
