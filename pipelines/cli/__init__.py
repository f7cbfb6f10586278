"""The `repo-analytics` command: a thin layer over the runs. `main.py` parses and dispatches,
`parser.py` holds the flags (one per setting of the spec), `options.py` turns the global
options into a destination and a pipeline, `commands.py` the subcommands, `exits.py` the exit
codes and one-line failures; `demo.py` and `report.py` are the `demo` and `report` commands."""
