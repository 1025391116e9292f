"""The order ``make test`` hands the tests out in (tests/conftest.py): the tests marked
``long`` first, so that pytest-xdist's workers end together."""

import pytest


def test_the_long_tests_are_collected_before_every_other(request):
    items = request.session.items
    long = [i for i, item in enumerate(items) if item.get_closest_marker("long")]
    if not long:
        pytest.skip("no test marked long is selected in this run")
    assert long == list(range(len(long))), "a test marked long comes after an unmarked one"
