"""Shared pytest configuration for the Python tests.

The oracle is GRIT's published Python implementation (grit-datatype==1.1.0,
a test-only dependency). Its non-raising check returns a must-use result
that warns when dropped unread; that warning is an error here, so a test
cannot silently ignore an oracle verdict.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # grit_cases


def pytest_configure(config):
    expect = os.environ.get("GRIT_EXPECT_EXTENSION_DIR")
    if expect:  # make test-asan-py: the suite must import the ASan build, not the in-place one
        from torch_grit import _C

        if not os.path.realpath(_C.__file__).startswith(os.path.realpath(expect) + os.sep):
            raise pytest.UsageError("GRIT_EXPECT_EXTENSION_DIR is %s, but torch_grit._C was imported from %s"
                                    % (expect, _C.__file__))
    try:
        import grit  # noqa: F401  (the oracle; the oracle tests import it themselves)
    except ImportError:
        return
    config.addinivalue_line("filterwarnings", "error::grit.GritUnusedResultWarning")


@pytest.fixture
def register_oracle_grade(monkeypatch):
    """Teach the oracle's check one more grade for the length of a test.

    The oracle's check knows only the six registered reference grades. Ours
    also checks a descriptor against a grade the caller claims; registering
    that grade in the oracle's tables (the same dicts its check reads) makes
    the oracle an equal referee for any grade.
    """
    import grit.grade as ograde

    def register(canonical):
        gid = ograde.grade_id_of(canonical)
        name = "GRADE_TEST_%016x" % gid
        monkeypatch.setitem(ograde.GRADE_REGISTRY, name, canonical)
        monkeypatch.setitem(ograde.GRADE_BY_ID, gid, name)
        return name

    return register
