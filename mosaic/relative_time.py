"""Relative time phrases resolved against the session date, in Python rather than by the model.

A 1.5B model does date arithmetic badly, so extraction copies the time words as said ("last week", "two days
ago", "next Friday") and ``resolve_time`` turns them into a date at the granularity the phrase gives (day, week,
month or year), with dateutil for absolute dates. A phrase it cannot read resolves to None and the fact keeps
the words as said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from dateutil import parser as date_parser
from dateutil.relativedelta import relativedelta

from core.quantities import count_pattern, count_word

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_COUNT = count_pattern(vague=True)  # "3", "three", "a few", "a couple of" (core.quantities)
_UNITS = {"day": "days", "week": "weeks", "month": "months", "year": "years"}
_SAME_DAY = ("today", "tonight", "this morning", "this afternoon", "this evening", "right now", "now", "currently")


@dataclass(frozen=True)
class ResolvedTime:
    """An absolute time: ``iso`` is YYYY-MM-DD, YYYY-MM, YYYY or 'week of YYYY-MM-DD'; ``human`` reads well in text."""

    iso: str
    human: str


def parse_session_time(session_time: str | None) -> datetime | None:
    """Session time as a datetime; LoCoMo's '1:56 pm on 8 May, 2023' and ISO both work."""
    if not session_time:
        return None
    try:
        return date_parser.parse(session_time, fuzzy=True)
    except (ValueError, OverflowError):
        return None


def _day(d: date) -> ResolvedTime:
    return ResolvedTime(d.isoformat(), f"on {d.day} {d:%B %Y}")


def _week(d: date) -> ResolvedTime:
    monday = d - timedelta(days=d.weekday())
    return ResolvedTime(f"week of {monday.isoformat()}", f"in the week of {monday.day} {monday:%B %Y}")


def _month(d: date) -> ResolvedTime:
    return ResolvedTime(f"{d:%Y-%m}", f"in {d:%B %Y}")


def _year(d: date) -> ResolvedTime:
    return ResolvedTime(f"{d:%Y}", f"in {d:%Y}")


def resolve_time(expression: str, session: datetime | None) -> ResolvedTime | None:
    """Turn a time phrase into an absolute time relative to the session date; None if it cannot.

    Relative phrases (yesterday, 3 days ago, last week, next Friday, last summer is not handled)
    need the session date; absolute ones (May 2022, 7 May 2023, 2021) are parsed with dateutil,
    keeping only the components the phrase actually gave.
    """
    phrase = " ".join(expression.lower().strip().strip(".").split())
    if not phrase:
        return None
    today = session.date() if session else None
    if today is not None:
        if phrase in _SAME_DAY:
            return _day(today)
        if phrase in ("yesterday", "last night", "yesterday evening", "yesterday morning"):
            return _day(today - timedelta(days=1))
        if phrase in ("the day before yesterday", "day before yesterday"):
            return _day(today - timedelta(days=2))
        if phrase == "tomorrow":
            return _day(today + timedelta(days=1))
        m = re.fullmatch(rf"(?:about |around )?({_COUNT}) (day|week|month|year)s? ago", phrase)
        if m and count_word(m.group(1), vague=True) is not None:
            n, unit = count_word(m.group(1), vague=True), m.group(2)
            when = today - relativedelta(**{_UNITS[unit]: n})
            return {"day": _day, "week": _week, "month": _month, "year": _year}[unit](when)
        m = re.fullmatch(rf"in ({_COUNT}) (day|week|month|year)s?", phrase)
        if m and count_word(m.group(1), vague=True) is not None:
            n, unit = count_word(m.group(1), vague=True), m.group(2)
            when = today + relativedelta(**{_UNITS[unit]: n})
            return {"day": _day, "week": _week, "month": _month, "year": _year}[unit](when)
        m = re.fullmatch(r"(last|this|next|past) (week|weekend|month|year)", phrase)
        if m:
            shift = {"last": -1, "past": -1, "this": 0, "next": 1}[m.group(1)]
            unit = m.group(2)
            if unit == "week":
                return _week(today + timedelta(weeks=shift))
            if unit == "weekend":
                saturday = today - timedelta(days=today.weekday()) + timedelta(days=5) + timedelta(weeks=shift)
                return ResolvedTime(f"weekend of {saturday.isoformat()}", f"on the weekend of {saturday.day} {saturday:%B %Y}")
            if unit == "month":
                return _month(today + relativedelta(months=shift))
            return _year(today + relativedelta(years=shift))
        m = re.fullmatch(r"(last|this|next|on) (" + "|".join(_WEEKDAYS) + r")", phrase)
        if m:
            target = _WEEKDAYS.index(m.group(2))
            if m.group(1) in ("last", "on"):
                back = (today.weekday() - target) % 7 or 7
                return _day(today - timedelta(days=back))
            if m.group(1) == "next":
                ahead = (target - today.weekday()) % 7 or 7
                return _day(today + timedelta(days=ahead))
            return _day(today - timedelta(days=today.weekday()) + timedelta(days=target))
    if not re.search(r"\d|" + "|".join(m.lower() for m in ("January", "February", "March", "April", "June", "July", "August", "September", "October", "November", "December")) + r"|\bmay\b", phrase):
        return None
    try:
        a = date_parser.parse(phrase, fuzzy=True, default=datetime(2000, 1, 1))
        b = date_parser.parse(phrase, fuzzy=True, default=datetime(2001, 2, 2))
    except (ValueError, OverflowError):
        return None
    has_year, has_month, has_day = a.year == b.year, a.month == b.month, a.day == b.day
    if not has_year and today is not None and has_month:
        a = a.replace(year=today.year)  # "on 7 May" said in a 2023 session means 2023
        has_year = True
    if has_year and has_month and has_day:
        return _day(a.date())
    if has_year and has_month:
        return _month(a.date())
    if has_year and not has_day:
        return _year(a.date())
    return None
