"""Corpus preparation, Kaldi I/O, features, alignment ingestion and datasets."""
