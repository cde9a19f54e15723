"""Distributed training strategies, in four rooms around one contract.

The contract, at this level: strategy.py states the hooks (wrap_model; per step before_step,
after_backward, after_step; sync before a checkpoint or an evaluation; finalize, close) and
holds train_step, the one loop that calls them; options.py the options dataclasses;
registry.py the ``--algo`` table from which flags, YAML keys and docs are derived; base.py what
multi-learner strategies share; transport.py the few things they do with other learners.

- strategies/: one module per ``--algo``;
- rules/: the pure rules and codecs they are made of (rings, averaging, compression);
- processes/: the Transport over torch.distributed and what a real run needs around it;
- launch/: rendezvous, the learner entry point, supervision and the failure policy.

The simulator (asrdist.simulate) implements the same Transport on its clock and imports
nothing of processes/.
"""
