"""The HMM side of a hybrid system, shared by GMM training and decoding: trees, transition
models and topologies as kaldi-hmm-gmm objects, training graphs, Viterbi alignment and
alignment dirs. Nothing here knows what scores the frames (a GMM or a network).
"""
