#!/usr/bin/env python3
"""Checks that the alerting rules and the Grafana dashboard use the metrics the coordinator exports.

Usage: deploy/check-monitoring.py   (from anywhere; promtool checks the rules' syntax separately)
The metric names come from coordinator/src/metrics.rs (its `m.family("name", …)` calls), so a
renamed metric fails here. The dashboard must be valid JSON whose every panel queries only known
metrics, and together the panels must show every metric family.
"""
import json
import pathlib
import re
import sys

import yaml

root = pathlib.Path(__file__).resolve().parent.parent
problems = []
source = (root / "coordinator/src/metrics.rs").read_text()
known = set(re.findall(r'\bm\.family\(\s*"(cipherfleet_\w+)"', source))
if not known:
    sys.exit("check-monitoring: found no metric families in coordinator/src/metrics.rs")


def used(expr):
    return set(re.findall(r"\bcipherfleet_\w+", expr))


rules = yaml.safe_load((root / "deploy/monitoring/alerts.yml").read_text())
alert_metrics = set()
for group in rules["groups"]:
    for rule in group["rules"]:
        names = used(rule["expr"])
        alert_metrics |= names
        for n in names - known:
            problems.append(f"alerts.yml {rule['alert']}: unknown metric {n}")
for needed in ("cipherfleet_findings_open", "cipherfleet_hosts_online"):
    if needed not in alert_metrics:
        problems.append(f"alerts.yml: no alert on {needed}")

try:
    dash = json.loads((root / "deploy/monitoring/grafana-dashboard.json").read_text())
except json.JSONDecodeError as e:
    sys.exit(f"check-monitoring: grafana-dashboard.json is not JSON: {e}")
shown = set()
ids = [p.get("id") for p in dash.get("panels", [])]
if len(ids) != len(set(ids)) or None in ids:
    problems.append(f"dashboard: panel ids not unique: {ids}")
for p in dash.get("panels", []):
    targets = p.get("targets") or []
    if not targets or "gridPos" not in p:
        problems.append(f"dashboard panel {p.get('title')!r}: no targets or no gridPos")
    for t in targets:
        names = used(t.get("expr", ""))
        if not names:
            problems.append(f"dashboard panel {p.get('title')!r}: a query on no cipherfleet metric")
        for n in names - known:
            problems.append(f"dashboard panel {p.get('title')!r}: unknown metric {n}")
        shown |= names
for n in sorted(known - shown):
    problems.append(f"dashboard: no panel shows {n}")

for p in problems:
    print(f"check-monitoring: {p}")
print(f"check-monitoring: {len(known)} metric families, {sum(len(g['rules']) for g in rules['groups'])} alerts, "
      f"{len(ids)} panels: {'ok' if not problems else f'{len(problems)} problems'}")
sys.exit(1 if problems else 0)
