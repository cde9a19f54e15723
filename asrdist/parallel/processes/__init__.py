"""The torch.distributed side: the process Transport, DDP and its gradient codec, the
exchange threads, the outer-state server, elastic membership and health, the run's secret
and signed messages, stop signals. Only a real multi-process run imports these."""
