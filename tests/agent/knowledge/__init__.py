"""Tests of agent/knowledge/."""
