"""The strategy-agnostic trainer loop, schedules, checkpoints and metrics."""
