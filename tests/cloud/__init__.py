"""End-to-end loads of the cloud edition: real HTTP to the simulator, real DuckDB, ground truth.

Every expected value is computed here from the simulator's ground truth (`sim.truth(kind)`,
the clock of `sim.info()`) and the spec, never from extractor code. Commit lists are filtered by
the commit's real instant while the table keeps the zone-less local `date`, so the extractor
reads [start - 26 h, clock) for commits: an item must be loaded when its instant lies in
[start, clock) and may be loaded when it lies in [start - 26 h, start).
"""
