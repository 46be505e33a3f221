"""Tests of our own Home Assistant tools."""
