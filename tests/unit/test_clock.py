"""The stored time form: ``utc_now_iso`` writes what ``iso`` writes for the same moment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.shared import clock
from domain.shared.clock import iso, parse, utc_now_iso


@given(st.lists(st.integers(0, 4_102_444_800_000_000_000), min_size=1, max_size=5))
def test_now_is_written_as_iso_writes_that_moment(moments: list[int]) -> None:
    # One after another, within a second and across seconds (the second's text is kept).
    for nanos in sorted(moments) + [moments[0]]:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(clock.time, "time_ns", lambda nanos=nanos: nanos)
            written = utc_now_iso()
        moment = datetime.fromtimestamp(nanos // 1_000_000_000, UTC) + timedelta(microseconds=nanos % 1_000_000_000 // 1000)
        assert written == iso(moment)
        assert parse(written) == moment


def test_now_is_between_the_clock_readings_around_it() -> None:
    before = datetime.now(UTC)
    written = utc_now_iso()
    after = datetime.now(UTC)
    assert iso(before) <= written <= iso(after)
    assert len(written) == len("2026-01-01T00:00:00.000000Z") and written.endswith("Z")


@given(
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)),
    st.one_of(st.integers(-10**8, 10**8), st.floats(-1e6, 1e6, allow_nan=False)),
)
def test_a_shifted_moment_is_the_moment_plus_the_seconds(moment: datetime, seconds: float) -> None:
    # Whole seconds take the kept-second path; fractions take the general one.
    written = clock.shift(iso(moment), seconds)
    assert written == iso(moment + timedelta(seconds=seconds))
    assert clock.shift(iso(moment), seconds) == written  # and again, from what was kept


def test_a_moment_not_in_the_stored_form_is_shifted_all_the_same() -> None:
    assert clock.shift("2026-01-01T00:00:00+00:00", 90) == "2026-01-01T00:01:30.000000Z"
    assert clock.shift("2026-01-01T23:59:59.999999Z", 1) == "2026-01-02T00:00:00.999999Z"
