"""Tests of agent/graph/."""
