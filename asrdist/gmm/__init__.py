"""Flat-start monophone GMM-HMM training with kaldi-hmm-gmm, writing a Kaldi alignment dir."""
