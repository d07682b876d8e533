"""Training: optimizer and schedule, deterministic batches, checkpoints, resumable segments."""

from villani.training.loop import TrainingDiverged, train_segment

__all__ = ["TrainingDiverged", "train_segment"]
