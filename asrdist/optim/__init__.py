"""Optimizers: plain SGD, and NG-SGD (Kaldi's online natural gradient)."""
