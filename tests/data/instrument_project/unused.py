"""Not imported by main.py: instrumenting main.py leaves it out."""


def never_called():
    return None
