"""Power and energy of a layout: watts per GPU from the system file, or calibrated on the GPU power
samples that profiles record.

A GPU draws more while its SMs compute than while it waits on a collective or on the host, so a
layout's power depends on its busy share: :class:`PowerModel` predicts watts per GPU as
``idle + (busy - idle) * a``, with ``a`` the predicted share of the step spent in compute and the
optimizer step (:class:`extradeep.layouts.model.LayoutModel`'s parts). Calibrated by least squares on
measured mean power (nsys ``GPU_METRICS`` samples, :func:`power_observations`) when the runs'
busy shares differ by 5 points or more, else a constant (their mean); without samples the constant
is the hardware file's ``power`` (nominal, labelled 'system file'). On another GPU type the
calibrated watts are scaled by the ratio of the two GPUs' nominal powers (an estimate).
Energy is N x power x time x PUE (:mod:`extradeep.layouts.search`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from extradeep.columns import (
    CHUNKS,
    DP,
    GPUS,
    MICRO_BATCH,
    MICRO_BATCHES,
    PART_COMPUTE,
    PART_OPTIMIZER,
    PP,
    RECOMPUTE,
    SCHEDULE,
    STEP_TIME,
    TP,
    ZERO,
)
from extradeep.errors import InputError
from extradeep.layouts.hardware import load_hardware

POWER = "power"  # observed / predicted watts per GPU
MIN_SPREAD = 0.05  # busy shares must differ this much before idle and busy power are told apart
LAYOUT_COLUMNS = [GPUS, TP, PP, DP, MICRO_BATCH, MICRO_BATCHES, ZERO, RECOMPUTE, SCHEDULE, CHUNKS]


def busy_share(predicted: pd.DataFrame) -> np.ndarray:
    """Share of each predicted step spent computing (compute + optimizer parts), in [0, 1]."""
    busy = predicted[PART_COMPUTE].to_numpy(float) + predicted[PART_OPTIMIZER].to_numpy(float)
    return np.clip(busy / predicted[STEP_TIME].to_numpy(float), 0.0, 1.0)


class PowerModel:
    """Watts per GPU of any layout. ``fit(layout_model, observations=None)``: observations are a
    layout frame (as :meth:`LayoutModel.predict` takes) with a ``power`` column of measured watts.
    Fitted: ``idle_``, ``busy_`` (W), ``source_`` ('system file' or 'profile samples (n runs)'),
    ``reference_`` (the calibration GPU's nominal watts), ``residuals_`` (measured - fitted, W)."""

    def fit(self, layout_model, observations: pd.DataFrame | None = None) -> PowerModel:
        hardware = layout_model.hardware_
        self.layout_model_ = layout_model
        self.reference_ = float(hardware.gpu.power)
        self.residuals_ = np.zeros(0)
        if observations is None or not len(observations):
            self.idle_ = self.busy_ = self.reference_
            self.source_ = "system file"
            return self
        if POWER not in observations:
            raise InputError("power observations", f"no {POWER} column (watts per GPU)")
        watts = pd.to_numeric(observations[POWER], errors="coerce").to_numpy(float)
        if not (np.isfinite(watts) & (watts > 0)).all():
            raise InputError("power observations", "watts must be finite and > 0")
        share = busy_share(layout_model.predict(observations))
        self.idle_ = self.busy_ = float(np.mean(watts))
        if len(watts) >= 2 and np.ptp(share) >= MIN_SPREAD:
            design = np.column_stack([1 - share, share])
            idle, busy = np.linalg.lstsq(design, watts, rcond=None)[0]
            if 0 <= idle <= busy:
                self.idle_, self.busy_ = float(idle), float(busy)
        self.residuals_ = watts - self._watts(share)
        self.source_ = f"profile samples ({len(watts)} runs)"
        return self

    def _watts(self, share) -> np.ndarray:
        return self.idle_ + (self.busy_ - self.idle_) * np.asarray(share, float)

    def predict(self, predicted: pd.DataFrame, hardware=None) -> np.ndarray:
        """Watts per GPU for :meth:`LayoutModel.predict`'s output, on ``hardware`` (default the
        calibration's; another GPU type scales by the ratio of nominal powers)."""
        if not hasattr(self, "idle_"):
            raise InputError(None, "the power model is not fitted; call fit() first", field="power")
        target = self.layout_model_.hardware_ if hardware is None else load_hardware(hardware)
        return self._watts(busy_share(predicted)) * (target.gpu.power / self.reference_)
