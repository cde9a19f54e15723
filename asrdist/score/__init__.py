"""Scoring: Kaldi %WER lines, per-subset tables and reports; hubscr.pl with stm and glm."""
