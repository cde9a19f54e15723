"""Studies run on the many-learner simulator (asrdist.simulate); benchmark targets only."""
