"""Dataset sizes (paper Eq. 2-3) for inputs that do not carry them, so values are per epoch."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QDialog, QDialogButtonBox, QFormLayout, QSpinBox

from extradeep.aggregate.experiment import Dataset

MAX_SAMPLES = 2_000_000_000


class DatasetDialog(QDialog):
    """Training and validation samples, batch size per rank and weak scaling, as `--train-samples`,
    `--val-samples`, `--batch-size` and `--weak-scaling` of the CLI."""

    def __init__(self, dataset: Dataset | None = None, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Dataset sizes")
        self.train = QSpinBox(minimum=1, maximum=MAX_SAMPLES, value=50_000)
        self.val = QSpinBox(minimum=0, maximum=MAX_SAMPLES, value=10_000)
        self.batch = QSpinBox(minimum=1, maximum=1_000_000, value=64)
        self.weak = QCheckBox("weak scaling (the dataset grows with the ranks)")
        if dataset is not None:
            self.train.setValue(int(dataset.train_samples))
            self.val.setValue(int(dataset.val_samples))
            if not isinstance(dataset.batch_per_rank, str):
                self.batch.setValue(int(dataset.batch_per_rank))
            self.weak.setChecked(dataset.weak_scaling)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("Training samples", self.train)
        form.addRow("Validation samples", self.val)
        form.addRow("Batch size per rank", self.batch)
        form.addRow("", self.weak)
        form.addRow(buttons)

    def dataset(self) -> Dataset:
        return Dataset(
            train_samples=self.train.value(),
            val_samples=self.val.value(),
            batch_per_rank=self.batch.value(),
            weak_scaling=self.weak.isChecked(),
        )
