"""End-to-end loads of the self-hosted edition: real HTTP to the simulator, real DuckDB, truth.

Every expected value is computed here from the simulator's ground truth (`sim.truth(kind)`,
the clock of `sim.info()`), from the spec and from the README, never from extractor code.
Self-hosted cursors are aware UTC instants, so a run reads [start, clock): a commit belongs to
the window when its `authorTimestamp` lies in it, a pull request when its `updatedDate` does.
Scopes below the global level are discovered from the global lists: repositories (and their
projects) with any commit or pull request in the window, users from the `user` objects of
commits and the authors of pull requests seen there.
"""
