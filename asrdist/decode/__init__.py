"""Priors, graph building, hybrid decoding and alignment with a network."""
