"""The CSV export tables hold exactly what the host serves for the run's windows."""

from __future__ import annotations

from tests.selfhosted.conftest import Loaded
from tests.selfhosted.request_log import check_exports_equal_served, wire_time
from tests.selfhosted.truth import START, in_scope


def test_csv_exports_equal_what_the_host_serves(loaded: Loaded) -> None:
    """Export tables hold exactly the rows the CSV endpoints serve for the run's windows,
    typed as the README says; the commit hashes are those of the truth."""
    sizes = check_exports_equal_served(
        loaded.loader, loaded.sim, loaded.first_log, loaded.sim.basic_auth
    )
    scopes = loaded.scopes
    expected = sum(
        1
        for c in loaded.truth.commits
        if loaded.window.holds(c)
        for level, names in scopes.items()
        for s in names
        if in_scope(level, s, c)
    )
    assert sizes["commits"] == expected
    hashes = {
        h for (h,) in loaded.loader.rows("SELECT DISTINCT commit_hash FROM server_commit_exports")
    }
    assert hashes == {c["id"] for c in loaded.truth.commits if loaded.window.holds(c)}
    windows = {
        (wire_time(e["params"]["sinceDate"]), wire_time(e["params"]["untilDate"]))
        for e in loaded.first_log
        if ".csv." in e["endpoint"]
    }
    assert windows == {(START, loaded.truth.clock)}
