"""Tests of the agent package (custom_components/.../agent/)."""
