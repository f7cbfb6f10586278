"""The single-commit endpoint: full and abbreviated ids, files, ambiguous and missing ids,
unindexed repositories."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from simulator import Simulator
from tests.simulator.selfhosted.client import Api, commit_path, error_of
from tests.simulator.selfhosted.truth import Item, Truth, served


def test_single_commit_by_full_and_abbreviated_id(api: Api, truth: Truth) -> None:
    """The 25th endpoint: one commit item, by its full hash or a unique abbreviation."""
    newest_per_repo = {c["repository"]["slug"]: c for c in truth.commits}
    sample = [*newest_per_repo.values(), next(c for c in truth.commits if not c["parents"])]
    abbreviated = 0
    for item in sample:
        path = commit_path(item)
        assert api.json(f"{path}/{item['id']}") == served(item)
        same_prefix = [
            c
            for c in truth.commits
            if c["repository"] == item["repository"] and c["id"].startswith(item["id"][:10])
        ]
        if len(same_prefix) == 1:
            assert api.json(f"{path}/{item['id'][:10]}") == served(item)
            abbreviated += 1
    assert len(newest_per_repo) == len(truth.repos) and abbreviated >= len(truth.repos)


def test_single_commit_with_files(api: Api, truth: Truth) -> None:
    """withFiles=true adds the truth's files, summing to linesOfCode; false/absent: no files."""
    sample = [c for c in truth.commits if c["linesOfCode"]["added"] > 0][::50]
    sample.append(next(c for c in truth.commits if c["linesOfCode"] == {"added": 0, "deleted": 0}))
    for item in sample:
        path = f"{commit_path(item)}/{item['id']}"
        answer = api.json(path, withFiles="true")
        files = server_files(api, item["id"])
        assert answer == {**served(item), "files": files}
        for side in ("added", "deleted"):
            assert sum(f["linesOfCode"][side] for f in answer["files"]) == item["linesOfCode"][side]
        assert "files" not in api.json(path)
        assert "files" not in api.json(path, withFiles="false")
    assert any(len(server_files(api, c["id"])) > 1 for c in sample)


def server_files(api: Api, commit: str) -> list[Item]:
    """The truth's per-file rows for one commit."""
    (entry,) = api.sim.truth("files", commit=commit)
    assert entry["id"] == commit
    return list(entry["files"])


def ambiguous_pair(truth: Truth) -> tuple[Item, str, list[str]]:
    """In the first repository (generation order), two commits share 12 hex digits."""
    first = truth.repos[0]["slug"]
    groups: dict[str, list[str]] = defaultdict(list)
    for commit in truth.commits:
        if commit["repository"]["slug"] == first:
            groups[commit["id"][:12]].append(commit["id"])
    ((prefix, hashes),) = [(p, h) for p, h in groups.items() if len(h) > 1]
    item = next(c for c in truth.commits if c["id"] == hashes[0])
    return item, prefix, sorted(hashes)


def test_ambiguous_short_id_is_a_400_listing_candidates(api: Api, truth: Truth) -> None:
    item, prefix, hashes = ambiguous_pair(truth)
    for short in (prefix, prefix[:8]):
        error = error_of(api.get(f"{commit_path(item)}/{short}"), 400)
        assert "ambiguous" in error["message"].lower()
        assert all(h in error["message"] for h in hashes)
        assert "ambiguous" in (error["exceptionName"] or "").lower()
    for full in hashes:
        assert api.json(f"{commit_path(item)}/{full}")["id"] == full
        longer = next(n for n in range(13, 41) if sum(h.startswith(full[:n]) for h in hashes) == 1)
        assert api.json(f"{commit_path(item)}/{full[:longer]}")["id"] == full


def test_missing_commit_is_a_404_naming_commit_and_repository(api: Api, truth: Truth) -> None:
    item = truth.commits[0]
    repo = item["repository"]["slug"]
    missing = "0" * 39 + "1"
    assert missing not in {c["id"] for c in truth.commits}
    error = error_of(api.get(f"{commit_path(item)}/{missing}"), 404)
    assert missing in error["message"] and repo in error["message"]
    assert "nosuchcommit" in (error["exceptionName"] or "").lower()
    elsewhere = next(c for c in truth.commits if c["repository"]["slug"] != repo)
    error = error_of(api.get(f"{commit_path(item)}/{elsewhere['id']}"), 404)
    assert elsewhere["id"] in error["message"] and repo in error["message"]


def test_unindexed_repository_is_a_409_once_then_200(make_sim: Callable[..., Simulator]) -> None:
    sim = make_sim(edition="server")
    item = sim.truth("commits")[5]
    slug = item["repository"]["slug"]
    sim.set_conditions(unindexed={slug: 1})
    client = Api(sim)
    error = error_of(client.get(f"{commit_path(item)}/{item['id']}"), 409)
    assert "unindexed" in error["message"] and "try again" in error["message"].lower()
    assert "notindexed" in (error["exceptionName"] or "").lower()
    assert client.json(f"{commit_path(item)}/{item['id']}") == served(item)
    other = next(c for c in sim.truth("commits") if c["repository"]["slug"] != slug)
    sim.set_conditions(unindexed={slug: -1})
    for _ in range(3):
        error_of(client.get(f"{commit_path(item)}/{item['id']}"), 409)
    assert client.json(f"{commit_path(other)}/{other['id']}")["id"] == other["id"]
