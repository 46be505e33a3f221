"""Tests of agent/memory/."""
