"""Scripts, harnesses and results of measurements, run as `python bench/<script>.py --help`.

Not installed: what `ireneo bench` runs is the package `ireneo.benchmark`. Tests import the
harnesses they share with a script from here (`bench.crash`), as they import `tests.pg_cluster`.
"""
