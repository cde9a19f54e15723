"""Priors, graph building, hybrid decoding and scoring."""
