"""Step pattern parsing (`io.step_conventions.parse_pattern`): a user's `DOMAIN:REGEX` names a domain
only when the file has that domain, and a pattern that does not compile is one clear error."""

from __future__ import annotations

import pytest

from extradeep.errors import InputError
from extradeep.io.step_conventions import parse_pattern


def test_invalid_pattern_is_one_clear_error():
    with pytest.raises(InputError, match="invalid step pattern"):
        parse_pattern("train(", set())


def test_domain_prefix_only_for_domains_in_the_file():
    assert parse_pattern(r"myapp:iter (\d+)", {"myapp"}) == (parse_pattern(r"iter (\d+)", set())[0], "myapp")
    regex, domain = parse_pattern(r"epoch:(\d+)", {"myapp"})  # "epoch" is no domain here: all of it is the regex
    assert domain is None and regex.pattern == r"epoch:(\d+)"
