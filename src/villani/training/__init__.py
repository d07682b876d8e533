"""Training: optimizer and schedule, deterministic batches, checkpoints, resumable segments."""

from villani.training.loop import TrainingDiverged, train_run, train_segment

__all__ = ["TrainingDiverged", "train_run", "train_segment"]
