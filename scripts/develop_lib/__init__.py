"""The Python of scripts/develop: the development config's preparation and --check.

config.py runs with the leg virtualenv's Python (Home Assistant importable), by its path
rather than with `python -m`: its `check` command starts Home Assistant from the config
directory, and the repository must not be on that Python's path (from the repository, the
repository's custom_components package would shadow the config's custom_components/;
tests/test_develop_layout.py shows both). So config.py imports the standard library and
Home Assistant only. tests/packaging_probe.py imports it as `develop_lib.config` to seed
its entry the way scripts/develop does.
"""
