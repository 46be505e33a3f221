"""Tests of agent/models/."""
