"""Presenting answers: terminal tables, JSON, plots (matplotlib, reusable by the GUI) and the HTML report."""
