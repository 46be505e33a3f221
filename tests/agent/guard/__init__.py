"""Tests of agent/guard/."""
