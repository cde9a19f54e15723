"""The pure decision rules and codecs the strategies are made of: who pairs with whom, when to
average, how weights mix, how a tensor is compressed. No torch.distributed here, so the
simulator and the processes share every rule."""
