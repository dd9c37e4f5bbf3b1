"""`lossops.converters.training` moved to `lossops.training`; its names work from here for one release, with a
DeprecationWarning that says where they are now."""

import warnings

warnings.warn("lossops.converters.training is now lossops.training (export_training_step, TrainingStep, the "
              "optimizers, load_into_torch); the old name goes in the next release", DeprecationWarning, stacklevel=2)

from ..training.check import StepCheckError  # noqa: E402
from ..training.checkpoint import load_into_torch  # noqa: E402
from ..training.errors import StepExportError  # noqa: E402
from ..training.export import TrainingStep, export_training_step  # noqa: E402
from ..training.optimizers import SGD, Adam, AdamW  # noqa: E402

__all__ = ["SGD", "Adam", "AdamW", "StepCheckError", "StepExportError", "TrainingStep", "export_training_step",
           "load_into_torch"]
