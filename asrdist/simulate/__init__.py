"""Many learners in one process under a discrete-event clock, with the real strategies' rules."""
