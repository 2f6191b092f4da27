"""The region tree on the left: regions grouped by category with model formula, growth, SMAPE and share.

`RegionTreeModel` is a two-level item model over the workspace's region table for one metric (groups,
then regions); `RegionFilterProxy` filters by name (keeping groups of matching regions) and sorts
regions inside their group while groups keep their fixed order. `RegionPanel` wraps them with the
filter box, the metric selector and the sort selector.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import (QAbstractItemModel, QItemSelection, QItemSelectionModel, QModelIndex,
                            QSortFilterProxyModel, Qt, Signal)
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QLabel, QLineEdit, QTreeView,
                               QVBoxLayout, QWidget)

from gui.workspace import GROUP_LABELS, GROUP_ORDER, Workspace

COLUMNS = ["Region", "Model", "Growth", "SMAPE", "Share"]
SORT_ROLE = Qt.UserRole + 1
ROW_ROLE = Qt.UserRole + 2
SORT_CHOICES = {  # label -> (column, order)
    "Growth (steepest first)": (2, Qt.DescendingOrder),
    "Share (largest first)": (4, Qt.DescendingOrder),
    "SMAPE (best fit first)": (3, Qt.AscendingOrder),
    "Name": (0, Qt.AscendingOrder),
}


def format_share(share: float) -> str:
    return "" if not np.isfinite(share) else f"{100 * share:.1f}%"


def format_smape(smape: float) -> str:
    return "" if not np.isfinite(smape) else f"{smape:.1f}%"


class RegionTreeModel(QAbstractItemModel):
    """Groups (internal id 0) with region children (internal id = 1 + group number)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.ws: Workspace | None = None
        self.groups: list[str] = []
        self.children: list[np.ndarray] = []
        self.group_sign = 1  # the proxy flips it so groups keep their order in descending sorts
        self._cols: dict[str, np.ndarray] = {}

    def set_workspace(self, ws: Workspace | None, metric: str | None) -> None:
        self.beginResetModel()
        self.ws = ws
        self.groups, self.children = [], []
        if ws is not None and metric is not None:
            rows = ws.rows_for_metric(metric)
            for group in GROUP_ORDER:
                ids = rows.index[rows["group"].to_numpy() == group].to_numpy()
                if len(ids):
                    self.groups.append(group)
                    self.children.append(ids)
        self._refresh_columns()
        self.endResetModel()

    def models_changed(self) -> None:
        """Formulas, growth or SMAPE changed: refresh the cached columns and repaint the rows."""
        self._refresh_columns()
        for g, ids in enumerate(self.children):
            parent = self.index(g, 0)
            self.dataChanged.emit(self.index(0, 1, parent), self.index(len(ids) - 1, 3, parent))

    def _refresh_columns(self) -> None:
        if self.ws is None:
            self._cols = {}
            return
        r = self.ws.regions
        self._cols = {c: r[c].to_numpy() for c in ("region", "formula", "growth", "smape", "share",
                                                  "growth_rank", "reason", "kind")}

    # --- structure
    def index(self, row, column, parent=QModelIndex()):
        if not self.hasIndex(row, column, parent):
            return QModelIndex()
        if not parent.isValid():
            return self.createIndex(row, column, 0)
        return self.createIndex(row, column, parent.row() + 1)

    def parent(self, index=QModelIndex()):
        if not index.isValid() or index.internalId() == 0:
            return QModelIndex()
        return self.createIndex(index.internalId() - 1, 0, 0)

    def rowCount(self, parent=QModelIndex()):
        if not parent.isValid():
            return len(self.groups)
        if parent.internalId() == 0 and parent.column() == 0:
            return len(self.children[parent.row()])
        return 0

    def columnCount(self, parent=QModelIndex()):
        return len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation == Qt.Horizontal and role == Qt.DisplayRole:
            return COLUMNS[section]
        return None

    def row_id(self, index: QModelIndex) -> int | None:
        if not index.isValid() or index.internalId() == 0:
            return None
        return int(self.children[index.internalId() - 1][index.row()])

    # --- content
    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        if index.internalId() == 0:
            return self._group_data(index, role)
        row = int(self.children[index.internalId() - 1][index.row()])
        col = index.column()
        if role == Qt.DisplayRole:
            return self._display(row, col)
        if role == SORT_ROLE:
            return self._sort_key(row, col)
        if role == ROW_ROLE:
            return row
        if role == Qt.ToolTipRole:
            reason = self._cols["reason"][row]
            text = f"{self._cols['region'][row]} [{self._cols['kind'][row]}]"
            return f"{text}\n{self._cols['formula'][row] or reason}"
        return None

    def _group_data(self, index, role):
        group = self.groups[index.row()]
        if role == Qt.DisplayRole and index.column() == 0:
            return f"{GROUP_LABELS[group]} ({len(self.children[index.row()])})"
        if role == SORT_ROLE:
            return self.group_sign * GROUP_ORDER.index(group)
        return None

    def _display(self, row: int, col: int):
        c = self._cols
        if col == 0:
            return str(c["region"][row])
        if col == 1:
            return c["formula"][row] or f"({c['reason'][row]})"
        if col == 2:
            return c["growth"][row]
        if col == 3:
            return format_smape(c["smape"][row])
        return format_share(c["share"][row])

    def _sort_key(self, row: int, col: int):
        c = self._cols
        if col == 0:
            return str(c["region"][row]).lower()
        if col == 1:
            return c["formula"][row]
        value = {2: c["growth_rank"], 3: c["smape"], 4: c["share"]}[col][row]
        if not math.isfinite(value):  # unmodeled rows go last in the natural order of the column
            return math.inf if col == 3 else -1.0
        return float(value)


class RegionFilterProxy(QSortFilterProxyModel):
    """Case-insensitive name filter that keeps the groups of matching regions; groups never reorder."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setRecursiveFilteringEnabled(True)
        self.setFilterCaseSensitivity(Qt.CaseInsensitive)
        self.setFilterKeyColumn(0)
        self.setSortRole(SORT_ROLE)
        self.setDynamicSortFilter(True)

    def filterAcceptsRow(self, source_row, source_parent):
        if not source_parent.isValid():  # groups show only through their matching children
            return not self.filterRegularExpression().pattern()
        return super().filterAcceptsRow(source_row, source_parent)

    def sort(self, column, order=Qt.AscendingOrder):
        source = self.sourceModel()
        if source is not None:
            source.group_sign = -1 if order == Qt.DescendingOrder else 1
        super().sort(column, order)


class RegionPanel(QWidget):
    """Filter box, metric and sort selectors above the region tree; emits the selected row ids."""

    selection_changed = Signal(list)
    metric_changed = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.ws: Workspace | None = None
        self.model = RegionTreeModel(self)
        self.proxy = RegionFilterProxy(self)
        self.proxy.setSourceModel(self.model)
        self.filter_edit = QLineEdit(placeholderText="Filter regions…")
        self.filter_edit.setClearButtonEnabled(True)
        self.metric_combo = QComboBox()
        self.sort_combo = QComboBox()
        self.sort_combo.addItems(list(SORT_CHOICES))
        self.tree = QTreeView()
        self.tree.setModel(self.proxy)
        self.tree.setSortingEnabled(True)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSelectionMode(QAbstractItemView.ExtendedSelection)
        self.tree.setSelectionBehavior(QAbstractItemView.SelectRows)
        self._layout()
        self.filter_edit.textChanged.connect(self.set_filter)
        self.metric_combo.currentTextChanged.connect(self._metric_changed)
        self.sort_combo.currentTextChanged.connect(self.apply_sort)
        self.tree.selectionModel().selectionChanged.connect(self._emit_selection)

    def _layout(self):
        top = QHBoxLayout()
        top.addWidget(QLabel("Metric"))
        top.addWidget(self.metric_combo, 1)
        top.addWidget(QLabel("Sort"))
        top.addWidget(self.sort_combo, 2)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.filter_edit)
        box.addLayout(top)
        box.addWidget(self.tree, 1)

    @property
    def metric(self) -> str | None:
        return self.metric_combo.currentText() or None

    def show_workspace(self, ws: Workspace | None) -> None:
        self.ws = ws
        self.metric_combo.blockSignals(True)
        self.metric_combo.clear()
        if ws is not None:
            self.metric_combo.addItems(ws.metrics)
        self.metric_combo.blockSignals(False)
        self._reload()

    def _metric_changed(self, metric: str) -> None:
        self._reload()
        self.metric_changed.emit(metric)

    def _reload(self) -> None:
        self.model.set_workspace(self.ws, self.metric)
        self.tree.expandAll()
        self.apply_sort(self.sort_combo.currentText())
        for col, width in ((0, 230), (1, 230), (2, 130), (3, 55)):
            self.tree.setColumnWidth(col, width)

    def set_filter(self, text: str) -> None:
        self.proxy.setFilterFixedString(text)
        self.tree.expandAll()

    def apply_sort(self, label: str) -> None:
        column, order = SORT_CHOICES.get(label, (0, Qt.AscendingOrder))
        self.tree.sortByColumn(column, order)

    def visible_rows(self) -> list[int]:
        """Row ids of the regions the filter shows, in displayed order."""
        out = []
        for g in range(self.proxy.rowCount()):
            parent = self.proxy.index(g, 0)
            out += [self.proxy.index(i, 0, parent).data(ROW_ROLE) for i in range(self.proxy.rowCount(parent))]
        return out

    def selected_rows(self) -> list[int]:
        rows = []
        for index in self.tree.selectionModel().selectedRows(0):
            row = index.data(ROW_ROLE)
            if row is not None:
                rows.append(int(row))
        return rows

    def select_rows(self, rows: list[int]) -> None:
        """Select the given regions (those visible under the filter)."""
        wanted = set(rows)
        selection = QItemSelection()
        for g in range(self.proxy.rowCount()):
            parent = self.proxy.index(g, 0)
            for i in range(self.proxy.rowCount(parent)):
                index = self.proxy.index(i, 0, parent)
                if index.data(ROW_ROLE) in wanted:
                    selection.select(index, index)
        flags = QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows
        self.tree.selectionModel().select(selection, flags)

    def _emit_selection(self, *_):
        self.selection_changed.emit(self.selected_rows())
