"""Workarounds for defects of the libraries we depend on: the one place for them.

Each module here carries one workaround for one library at one exact version: a comment
naming the upstream behaviour (issue and fix), a check at import that the installed
version is the one it was written for (otherwise it stays out and the library's plain
public path is used), and a contract test under tests/ that fails when an upgrade
changes the behaviour, so the workaround is reviewed instead of silently applied to code
it was not written for. Other private touch points of the agent move here over time.
"""
