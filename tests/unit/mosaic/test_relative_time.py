"""Time phrases as said, resolved against the session date (mosaic.relative_time): relative and absolute phrases,
count words, the session-date forms the benchmarks write, and None for what cannot be read."""

from __future__ import annotations

from datetime import datetime

import pytest

from mosaic.relative_time import parse_session_time, resolve_time

SESSION = parse_session_time("1:56 pm on 8 May, 2023")  # a Monday


@pytest.mark.parametrize(
    "phrase, iso",
    [
        ("yesterday", "2023-05-07"),
        ("Today", "2023-05-08"),
        ("3 days ago", "2023-05-05"),
        ("two weeks ago", "week of 2023-04-24"),
        ("a month ago", "2023-04"),
        ("last week", "week of 2023-05-01"),
        ("next month", "2023-06"),
        ("last year", "2022"),
        ("last Friday", "2023-05-05"),
        ("last Monday", "2023-05-01"),
        ("next Monday", "2023-05-15"),
        ("last weekend", "weekend of 2023-05-06"),
        ("in 2 weeks", "week of 2023-05-22"),
        ("7 May 2022", "2022-05-07"),
        ("May 2021", "2021-05"),
        ("2019", "2019"),
        ("on 20 April", "2023-04-20"),
    ],
)
def test_relative_and_absolute_times_resolve_against_the_session(phrase, iso):
    resolved = resolve_time(phrase, SESSION)
    assert resolved is not None and resolved.iso == iso


@pytest.mark.parametrize(
    "said, parsed",
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),  # LoCoMo's form
        ("2024-01-31T09:05:00", datetime(2024, 1, 31, 9, 5)),
        ("2024-01-31", datetime(2024, 1, 31)),
        ("not a date at all", None),
        ("", None),
        (None, None),
    ],
)
def test_session_times_parse_in_locomo_and_iso_forms(said, parsed):
    assert parse_session_time(said) == parsed


@pytest.mark.parametrize(
    "phrase, iso",
    [("a few days ago", "2023-05-05"), ("couple of weeks ago", "week of 2023-04-24"), ("several years ago", "2020"),
     ("twelve days ago", "2023-04-26"), ("in a few days", "2023-05-11")],
)
def test_count_words_come_from_core_quantities(phrase, iso):
    resolved = resolve_time(phrase, SESSION)
    assert resolved is not None and resolved.iso == iso


def test_unresolvable_phrases_give_none():
    assert resolve_time("someday", SESSION) is None
    assert resolve_time("yesterday", None) is None
    assert resolve_time("", SESSION) is None
