"""Tests of agent/runtime/."""
