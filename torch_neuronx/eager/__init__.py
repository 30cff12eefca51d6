"""Eager execution on neuron: one cached executable per op call (decisions 6 and 7)."""
