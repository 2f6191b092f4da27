"""The settings-file keys and names the front ends show (a light import: no pandas, no reading)."""

from __future__ import annotations

from extradeep.io.config import CONFIG_NAME, DEFAULTS, folder_config_path

__all__ = ["CONFIG_NAME", "DEFAULTS", "folder_config_path"]
