"""Launch/rendezvous and one module per distributed strategy."""
