"""The Kaldi recipes whose rules asrdist follows where they differ (data preparation, scoring):
egs/swbd/s5c for Switchboard-1 (swbd300) and egs/fisher_swbd/s5 for Fisher + Switchboard
(swbd2000)."""

S5C, FISHER_SWBD = "s5c", "fisher_swbd"
