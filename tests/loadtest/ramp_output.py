"""Checks what deploy/loadtest/ramp printed (loadtest_check.sh, ghz_check.sh): its header, then
one line per rate asked for, in order, each with calls answered and 0 < p50 <= p99. FAILED says
how many of a rate's calls may fail: `none`, or `some` (not all: RATE x SECONDS of them).
    ramp_output.py OUTPUT SECONDS none|some RATE...
"""
import sys

path, seconds, failed_ok, *rates = sys.argv[1:]
lines = open(path).read().split("\n")
assert lines[0].split() == ["offered", "achieved", "p50_ms", "p99_ms", "failed"], lines[0]
rows = [line.split() for line in lines[1:] if line.strip()]
assert [r[0] for r in rows] == rates, rows
for offered, achieved, p50, p99, failed in rows:
    calls = max(1, int(int(offered) * float(seconds)))
    most = 0 if failed_ok == "none" else calls - 1
    assert 0 <= int(failed) <= most, f"{failed} of {calls} calls failed: {rows}"
    assert float(achieved) > 0 and 0 < float(p50) <= float(p99), rows
print("failed calls:", sum(int(r[4]) for r in rows))
