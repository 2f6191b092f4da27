"""Formatting helpers (a module beside the package, imported absolutely)."""


def format_report(report: dict) -> list[str]:
    return [f"{key}: {value:.4f}" for key, value in sorted(report.items())]


def running_total(values):
    total = 0.0
    for value in values:
        total += value
        yield total


class Registry:
    """Counts calls; its dunder methods stay uninstrumented."""

    count = 0

    def __len__(self):
        return self.count

    @classmethod
    def bump(cls):
        cls.count += 1
        return cls.count
