#!/usr/bin/env python3
"""CPU per statement from a PostgreSQL log written with log_statement_stats = on
and log_min_error_statement = log (each statement's getrusage, then its text).

Usage: statement-cpu.py RESULTS [N] < postgres.log
Prints the N (default 15) statements that used the most CPU (user + system,
parse, bind and execute together), each as µs per stored result of RESULTS,
with its executions and its first 100 characters; the total first. 20-ingest runs
it over the campaign's part of the log when BENCH_PG_CONF turns the stats on:
unlike pg_stat_statements' times, these count no waiting (for locks, for the
CPU, for the disk), nor nested statements twice.
"""
import collections
import re
import sys

results = max(int(sys.argv[1]), 1)
top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
usage = re.compile(r"!\s*([\d.]+) s user, ([\d.]+) s system, [\d.]+ s elapsed")
cpu = collections.defaultdict(float)
calls = collections.Counter()
pending = None
executes = False
in_stats = False
for line in sys.stdin:
    m = re.search(r"LOG:  (\w+) (MESSAGE )?STATISTICS", line)
    if m:
        in_stats, pending = True, None
        executes = m.group(1) in ("EXECUTE", "QUERY")
        continue
    m = usage.search(line) if in_stats else None
    if m:
        pending, in_stats = float(m.group(1)) + float(m.group(2)), False
        continue
    m = re.search(r"STATEMENT:  (.*)", line)
    if m and pending is not None:
        text = " ".join(m.group(1).split())[:100]
        cpu[text] += pending
        calls[text] += executes
        pending = None
total = sum(cpu.values())
print(f"statement CPU {total * 1e6 / results:.0f} µs a result in all ({results} results)")
for text, seconds in sorted(cpu.items(), key=lambda kv: -kv[1])[:top]:
    print(f"{seconds * 1e6 / results:7.1f} µs  {calls[text]:6d} runs  {text}")
