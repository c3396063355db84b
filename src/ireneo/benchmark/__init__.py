"""What `ireneo bench` runs: synthetic histories (`generate`, their words in `templates/`), the
runner that scores recall on them (`run`, `probe`, `report`), LoCoMo (`locomo`) and the load
run against a real server (`load`, `server_process`, `traffic`). Scripts and other harnesses
live in the repository's top-level `bench/`, not installed (docs/benchmark.md)."""
