"""The private names of dlt this project uses: here, and nowhere else in it.

Checked against dlt 1.31.0. The project pins dlt to that minor (`>=1.31,<1.32` in
pyproject.toml), and `tests/project/test_dlt_pin.py` fails when another minor is installed: before
the
pin moves, check each name below against the new release (its signature and what it does).
`docs/decisions/dlt-patches.md` records why nothing else of dlt's is reached into.

Three names, none of them replaced, only called:

- `_load_storage_config`: the pipeline's load folder, as `Pipeline._load_storage_config()` gives
  it and `LoaderConfiguration._load_storage_config` takes it (one name, the method feeding the
  field, as `pipeline.load()` does). A backfill loads a window with dlt's own load step (`Load`)
  in a thread of its own while the next window is read (`pipelines/runs/background_load.py`):
  `pipeline.load()` cannot run beside `pipeline.extract()` on one pipeline. The crash recovery
  (`pipelines/runs/load.py: settle_pending`, `pipelines/runs/interrupted.py`) reads and completes
  the
  packages in that folder, which dlt's public methods only list.
- `_get_normalize_storage`: the extracted packages, to delete the copy a crash left behind after
  dlt's normalize had committed the package (`pipelines/runs/load.py: drop_committed_extracts`):
  dlt's public methods only list them.
- `_update_last_run_context`: what `pipeline.load()` records of a load that ended (the first run
  over, the run's folders), done after the background load as `pipeline.load()` does it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import dlt
    from dlt.common.storages import LoadStorage
    from dlt.common.storages.load_package import PackageStorage
    from dlt.load.configuration import LoaderConfiguration

VERIFIED_DLT = "1.31"  # the minor release of dlt these names were checked against


def load_storage(pipeline: dlt.Pipeline) -> LoadStorage:
    """The pipeline's load folder: its normalized and loaded packages."""
    from dlt.common.storages import LoadStorage

    return LoadStorage(False, [], pipeline._load_storage_config())


def loader_configuration(pipeline: dlt.Pipeline, workers: int) -> LoaderConfiguration:
    """dlt's load step configuration for the pipeline's load folder, as `pipeline.load()`
    makes it (`workers` jobs at once)."""
    from dlt.load.configuration import LoaderConfiguration

    return LoaderConfiguration(
        workers=workers, _load_storage_config=pipeline._load_storage_config()
    )


def extracted_packages(pipeline: dlt.Pipeline) -> PackageStorage:
    """The pipeline's extracted packages (not yet normalized)."""
    return pipeline._get_normalize_storage().extracted_packages


def record_load_run(pipeline: dlt.Pipeline) -> None:
    """What `pipeline.load()` records after a load: the first run is over, and the folders
    the run used."""
    pipeline._update_last_run_context()
