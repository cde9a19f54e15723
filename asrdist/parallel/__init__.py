"""Launch/rendezvous and one module per distributed strategy.

strategy.py states the hook contract (wrap_model; per step before_step, after_backward,
after_step; sync before a checkpoint or an evaluation; finalize, close) and holds train_step,
the one loop that calls the hooks; options.py the options dataclasses; registry.py the
``--algo`` table from which flags, YAML keys and docs are derived; base.py what multi-learner
strategies share; transport.py the few things they do with other learners, which processes.py
does over torch.distributed (and the simulator on its clock); membership.py who left an
elastic run (--elastic: adpsgd, hadpsgd).
"""
