"""Kaldi formats without Kaldi binaries: object serialisation, tables and data dirs, CMVN
stats, alignments, HMM topologies, transition models, GMMs and lang dirs.

Imports nothing of asrdist but ``errors`` and ``fsutil``: every other package builds on it.
"""
