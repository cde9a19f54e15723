"""Many learners in one process under a discrete-event clock, each running its registered
strategy on the clock's transport."""
