"""Acoustic models: BLSTM and DNN."""
