"""The list of skipped files and other input problems of the open input, kept visible in a dock.

Reading a folder skips bad files and goes on (`Experiment.problems`, one line each). Those lines are
shown here for as long as the input is open, and a button in the status bar says how many there are
and brings the dock back when it was closed.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QListWidget, QPushButton


class ProblemsDock(QDockWidget):
    """Dock with one line per problem of the open input, and its status-bar button."""

    def __init__(self, parent=None):
        super().__init__("Skipped files and input problems", parent)
        self.setObjectName("problems")
        self.list = QListWidget()
        self.list.setWordWrap(True)
        self.list.setTextElideMode(Qt.ElideNone)
        self.setWidget(self.list)
        self.button = QPushButton(flat=True, visible=False)
        self.button.setToolTip("Show the files that were skipped and why")
        self.button.clicked.connect(self.show_again)

    @property
    def problems(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def set_problems(self, problems: list[str]) -> None:
        """Show these problems (the dock opens when there are any, and hides when there are none)."""
        self.list.clear()
        self.list.addItems(problems)
        count = len(problems)
        self.button.setText(f"⚠ {count} input problem{'s' if count != 1 else ''}")
        self.button.setVisible(bool(count))
        self.setVisible(bool(count))

    def show_again(self) -> None:
        self.show()
        self.raise_()
