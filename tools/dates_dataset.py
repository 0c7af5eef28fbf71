#!/usr/bin/env python3
"""Written dates -> ISO 8601 (YYYY-MM-DD): the task of models/dates-seq2seq/.

Every example is (source, target): a valid calendar date written in one of the FORMATS
below, and the same date as "YYYY-MM-DD".  The rules that make every source unambiguous:

  * Dates run from 1930-01-01 to 2029-12-31 and are always valid (30 days hath
    September...; February 29 only in leap years: divisible by 4, except centuries not
    divisible by 400 — 2000 is a leap year).
  * Two-digit years: 30-99 -> 1930-1999, 00-29 -> 2000-2029 (the range above, so a
    two-digit year never has two readings).
  * Numeric dates with slashes are American: month/day/year ("3/4/99" is 1999-03-04).
    Dashes with a month abbreviation are day-month-year ("04-Mar-1999"); dots and plain
    digit strings are year-month-day ("1999.03.04", "19990304").
  * Weekday names, when present, are the true weekday of the date.
  * Word formats appear as written ("March") or all lower case ("march").

Held-out split: by *date*.  A fixed-seed shuffle of the 36,524 dates puts 10% of them in
the held-out set; training never sees those dates in any format.  So a held-out example
is a date the model has never seen, written in a format it has (splitting by (date,
format) pairs instead would let the model see the same date in a sibling format and
copy the answer it learnt for it, which measures memory rather than reading).

Usage (a preview):
    /usr/bin/python3 tools/dates_dataset.py
"""

from __future__ import annotations

import datetime
import random

FIRST = datetime.date(1930, 1, 1)
LAST = datetime.date(2029, 12, 31)
HELDOUT_FRACTION = 0.10
SPLIT_SEED = 20261123

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
MONTH_ABBR = [m[:3] for m in MONTHS]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
WEEKDAY_ABBR = [d[:3] for d in WEEKDAYS]
ORDINAL_WORDS = [
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
    "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
    "seventeenth", "eighteenth", "nineteenth", "twentieth", "twenty-first",
    "twenty-second", "twenty-third", "twenty-fourth", "twenty-fifth", "twenty-sixth",
    "twenty-seventh", "twenty-eighth", "twenty-ninth", "thirtieth", "thirty-first"]


def ordinal_suffix(day: int) -> str:
    """1st 2nd 3rd 4th ... 11th 12th 13th ... 21st 22nd 23rd ... 31st."""
    if 11 <= day % 100 <= 13:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def yy(d: datetime.date) -> str:
    """Two-digit year (the range rule above makes it unambiguous)."""
    return f"{d.year % 100:02d}"


# name -> writer; the example in each comment is 1999-03-04, a Thursday.
FORMATS = {
    "iso": lambda d: f"{d.year:04d}-{d.month:02d}-{d.day:02d}",                # 1999-03-04
    "slash_mdy_short": lambda d: f"{d.month}/{d.day}/{yy(d)}",                   # 3/4/99
    "slash_mdy": lambda d: f"{d.month}/{d.day}/{d.year}",                        # 3/4/1999
    "slash_mdy_padded": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",         # 03/04/1999
    "dots_ymd": lambda d: f"{d.year}.{d.month:02d}.{d.day:02d}",                 # 1999.03.04
    "compact_ymd": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",                # 19990304
    "month_day_year": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",      # March 4, 1999
    "month_ord_yy": lambda d: f"{MONTHS[d.month - 1]} {d.day}{ordinal_suffix(d.day)} {yy(d)}",
    # March 4th 99
    "month_day_apostrophe": lambda d: f"{MONTHS[d.month - 1]} {d.day}, '{yy(d)}",  # March 4, '99
    "abbr_day_year": lambda d: f"{MONTH_ABBR[d.month - 1]}. {d.day}, {d.year}",  # Mar. 4, 1999
    "day_abbr_year": lambda d: f"{d.day} {MONTH_ABBR[d.month - 1]} {d.year}",    # 4 Mar 1999
    "day_month_year": lambda d: f"{d.day} {MONTHS[d.month - 1]} {d.year}",       # 4 March 1999
    "dash_dmy_abbr": lambda d: f"{d.day:02d}-{MONTH_ABBR[d.month - 1]}-{d.year}",  # 04-Mar-1999
    "ord_of_month": lambda d: f"{d.day}{ordinal_suffix(d.day)} of {MONTHS[d.month - 1]} {d.year}",
    # 4th of March 1999
    "words_ordinal": lambda d: f"the {ORDINAL_WORDS[d.day - 1]} of {MONTHS[d.month - 1]}, {d.year}",
    # the fourth of March, 1999
    "weekday_month_day_year": lambda d: (f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month - 1]} "
                                         f"{d.day}, {d.year}"),  # Thursday, March 4, 1999
    "weekday_abbr_day_month": lambda d: (f"{WEEKDAY_ABBR[d.weekday()]} {d.day} "
                                         f"{MONTH_ABBR[d.month - 1]} {yy(d)}"),  # Thu 4 Mar 99
}
# Formats with letters also appear in lower case.
WORD_FORMATS = [name for name, f in FORMATS.items() if any(c.isalpha() for c in f(FIRST))]


def iso(d: datetime.date) -> str:
    return d.isoformat()


def all_dates() -> list[datetime.date]:
    n = (LAST - FIRST).days + 1
    return [FIRST + datetime.timedelta(days=i) for i in range(n)]


def split_dates() -> tuple[list[datetime.date], list[datetime.date]]:
    """(train dates, held-out dates), disjoint, fixed by SPLIT_SEED."""
    dates = all_dates()
    order = list(range(len(dates)))
    random.Random(SPLIT_SEED).shuffle(order)
    n_heldout = round(HELDOUT_FRACTION * len(dates))
    heldout = sorted(order[:n_heldout])
    train = sorted(order[n_heldout:])
    return [dates[i] for i in train], [dates[i] for i in heldout]


def render(d: datetime.date, fmt: str, lower: bool) -> str:
    text = FORMATS[fmt](d)
    return text.lower() if lower else text


def sample(rng: random.Random, dates: list[datetime.date]) -> tuple[str, str, str]:
    """One random example: (source, target, format label)."""
    d = rng.choice(dates)
    fmt = rng.choice(list(FORMATS))
    lower = fmt in WORD_FORMATS and rng.random() < 0.25
    return render(d, fmt, lower), iso(d), fmt + (" (lower case)" if lower else "")


def unique_examples(rng: random.Random, dates: list[datetime.date], n: int
                    ) -> list[tuple[str, str, str]]:
    """n examples with distinct sources."""
    seen, out = set(), []
    while len(out) < n:
        ex = sample(rng, dates)
        if ex[0] not in seen:
            seen.add(ex[0])
            out.append(ex)
    return out


def max_source_length() -> int:
    """The longest source any date and format gives (37: "the twenty-seventh of September, 1999")."""
    return max(len(f(d)) for d in all_dates() for f in FORMATS.values())


def alphabet() -> list[str]:
    """Every character any source or target can contain, sorted by code point."""
    words = MONTHS + WEEKDAYS + ORDINAL_WORDS + ["the", "of", "st", "nd", "rd", "th"]
    text = " ".join(words)
    chars = set(text) | set(text.lower()) | set("0123456789") | set(" ,./-'")
    return sorted(chars)


def self_check() -> None:
    """The rules above, asserted: a disjoint split, leap days only in leap years, two-digit
    years read back by the 30-99 / 00-29 rule, every source within the alphabet."""
    train, heldout = split_dates()
    assert not set(train) & set(heldout) and len(train) + len(heldout) == len(all_dates())
    chars = set(alphabet())
    for d in all_dates():
        for fmt in FORMATS:
            text = render(d, fmt, lower=fmt in WORD_FORMATS)
            assert set(text) <= chars, (text, set(text) - chars)
    assert render(datetime.date(1999, 3, 4), "weekday_month_day_year", False) \
        == "Thursday, March 4, 1999"
    assert datetime.date(2000, 2, 29) in all_dates()
    for d in all_dates():
        assert (1900 if int(yy(d)) >= 30 else 2000) + int(yy(d)) == d.year
    assert not any(d.month == 2 and d.day == 29 and d.year % 4 for d in all_dates())


if __name__ == "__main__":
    self_check()
    rng = random.Random(0)
    train, heldout = split_dates()
    print(f"{len(train)} training dates, {len(heldout)} held-out dates, "
          f"{len(FORMATS)} formats, alphabet {''.join(alphabet())!r}")
    d = datetime.date(1999, 3, 4)
    for fmt in FORMATS:
        print(f"  {fmt:24s} {render(d, fmt, False)!r}")
    for _ in range(5):
        print(sample(rng, train))
