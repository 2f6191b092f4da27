"""What differs between the Pythons that pyproject.toml allows (3.10 and newer), in one place."""

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli package (a dependency there)
    import tomli as tomllib

__all__ = ["tomllib"]
