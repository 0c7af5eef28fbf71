#!/usr/bin/env python3
"""Chat conversations about dates: the task of models/chat-instruct/.

Every conversation is a list of ChatML messages (system, then user and assistant turns:
one turn in the held-out set, one or (25 %) two in training) whose assistant messages are short exact
answers:

  task            example question (phrasings vary)                      answer
  days_in_month   How many days are in February 2024?                     29
  leap_year       Is 2024 a leap year?                                    Yes
  iso_date        Write March 4, 2021 as YYYY-MM-DD.                      2021-03-04

Rules that make every answer exact:
  * Years 1901..2099, so the leap rule is "divisible by 4" (2000 is a leap year by the
    400 rule too; 1900 and 2100, the exceptions, are outside the range).
  * iso_date: a valid date in 1901..2099 written "March 4, 2021", "4 March 2021" or
    "3/4/2021" (slashes are American: month/day/year).

Held-out split: by *problem*, never by phrasing.  A fixed-seed shuffle sets aside 10 % of
each task's problems -- the years of days_in_month and
leap_year (all twelve months of a held-out year), the dates of iso_date -- and training
never asks about them in any phrasing, so a held-out question is a problem the model has
not seen, asked in a way it has.

The tasks were chosen to be learnable to >= 95 % exact match by a ~1 M parameter model in
about ten minutes on two busy CPU cores; the weekday of a date and "N days after a date"
(both in issue 30's examples) need calendar arithmetic the model would have to learn from
far more data.  Two-digit addition and subtraction (a, b in 0..99; "What is 17 + 25?")
were tried and left out: a 9-minute run (850 steps of 64 conversations, over half of
them arithmetic) reached 6.5 % (add) and 7 % (sub) exact match on held-out pairs -- the
units digit right only at chance, 10 % -- and a second with addition alone and up to six
turns per conversation 12 % in 600 steps (the machine was shared; the steps, not the
minutes, are what the model needs).

Usage (a preview and self-check):
    /usr/bin/python3 tools/chat_dataset.py
"""

from __future__ import annotations

import datetime
import random

SPLIT_SEED = 20300207
HELDOUT_FRACTION = 0.10
FIRST_YEAR, LAST_YEAR = 1901, 2099

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]

# The template's default (used when a conversation has no system message) comes first.
DEFAULT_SYSTEM = "You are a helpful assistant."
SYSTEM_PROMPTS = [
    DEFAULT_SYSTEM,
    "You are a concise assistant. Answer with the result only.",
    "You help with calendar questions.",
    "Answer briefly.",
]
# Training draws the system prompt with these weights (the default most often).
SYSTEM_WEIGHTS = [0.55, 0.15, 0.15, 0.15]

PHRASINGS = {
    "days_in_month": [
        "How many days are in {month} {year}?",
        "How many days does {month} {year} have?",
        "How many days were there in {month} {year}?",
        "Number of days in {month} {year}?",
    ],
    "leap_year": [
        "Is {year} a leap year?",
        "Was {year} a leap year?",
        "Is the year {year} a leap year?",
        "Leap year or not: {year}?",
    ],
    "iso_date": [
        "Write {date} as YYYY-MM-DD.",
        "What is {date} in ISO 8601 format?",
        "Convert {date} to ISO format.",
        "Give the ISO date for {date}.",
    ],
}
TASKS = list(PHRASINGS)
# Training mix (the ISO task has the most to learn: twelve month names and three styles).
TASK_WEIGHTS = {"days_in_month": 0.3, "leap_year": 0.2, "iso_date": 0.5}
DATE_STYLES = ["month_day_year", "day_month_year", "slash_mdy"]


def is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def write_date(d: datetime.date, style: str) -> str:
    if style == "month_day_year":
        return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"
    if style == "day_month_year":
        return f"{d.day} {MONTHS[d.month - 1]} {d.year}"
    assert style == "slash_mdy"
    return f"{d.month}/{d.day}/{d.year}"


def problems(task: str) -> list:
    """Every problem of a task (the unit of the held-out split), in a fixed order."""
    if task in ("days_in_month", "leap_year"):
        return list(range(FIRST_YEAR, LAST_YEAR + 1))  # split by year
    assert task == "iso_date"
    first, last = datetime.date(FIRST_YEAR, 1, 1), datetime.date(LAST_YEAR, 12, 31)
    return [first + datetime.timedelta(days=i) for i in range((last - first).days + 1)]


def split() -> dict[str, tuple[list, list]]:
    """task -> (training problems, held-out problems), disjoint, fixed by SPLIT_SEED.
    days_in_month and leap_year share one split of the years."""
    out = {}
    for task in TASKS:
        key = "years" if task in ("days_in_month", "leap_year") else task
        items = problems(task)
        order = list(range(len(items)))
        random.Random(f"{SPLIT_SEED}/{key}").shuffle(order)
        n = round(HELDOUT_FRACTION * len(items))
        out[task] = ([items[i] for i in sorted(order[n:])], [items[i] for i in sorted(order[:n])])
    return out


def question(rng: random.Random, task: str, problem) -> tuple[str, str]:
    """(question text, answer) for one problem, in a random phrasing."""
    phrasing = rng.choice(PHRASINGS[task])
    if task == "days_in_month":
        year, month = problem, rng.randrange(1, 13)
        return (phrasing.format(month=MONTHS[month - 1], year=year),
                str(days_in_month(year, month)))
    if task == "leap_year":
        return phrasing.format(year=problem), "Yes" if is_leap(problem) else "No"
    d = problem
    return phrasing.format(date=write_date(d, rng.choice(DATE_STYLES))), d.isoformat()


def sample(rng: random.Random, pools: dict[str, list], turns: int = 1,
           system: str | None = "random") -> dict:
    """One conversation: {"task", "messages", "answer"} (task and answer of the last turn).

    pools: task -> problems to draw from.  system: "random" draws one of SYSTEM_PROMPTS
    (weighted), None leaves the system message out (the template adds its default).
    """
    messages = []
    if system == "random":
        system = rng.choices(SYSTEM_PROMPTS, weights=SYSTEM_WEIGHTS)[0]
    if system is not None:
        messages.append({"role": "system", "content": system})
    for _ in range(turns):
        task = rng.choices(TASKS, weights=[TASK_WEIGHTS[t] for t in TASKS])[0]
        text, answer = question(rng, task, rng.choice(pools[task]))
        messages += [{"role": "user", "content": text},
                     {"role": "assistant", "content": answer}]
    return {"task": task, "messages": messages, "answer": answer}


def training_sample(rng: random.Random, train: dict[str, list]) -> dict:
    """A training conversation: one turn, or (25 %) two."""
    return sample(rng, train, turns=2 if rng.random() < 0.25 else 1)


def heldout_set(per_task: dict[str, int], seed: int = 7) -> list[dict]:
    """Held-out conversations, one turn each, distinct questions, from held-out problems
    only: per task `per_task[task]` of them (fewer if the task has fewer distinct
    questions).  A quarter have no system message (the template's default stands in),
    the rest one of SYSTEM_PROMPTS, uniformly."""
    rng = random.Random(seed)
    heldout = {t: pair[1] for t, pair in split().items()}
    rows, seen = [], set()
    for task in TASKS:
        n, tries = 0, 0
        while n < per_task[task] and tries < 100 * per_task[task]:
            tries += 1
            text, answer = question(rng, task, rng.choice(heldout[task]))
            if text in seen:
                continue
            seen.add(text)
            system = None if rng.random() < 0.25 else rng.choice(SYSTEM_PROMPTS)
            messages = ([] if system is None else [{"role": "system", "content": system}])
            messages += [{"role": "user", "content": text}]
            rows.append({"task": task, "messages": messages, "answer": answer})
            n += 1
    return rows


def self_check() -> None:
    """Disjoint splits, true answers, ASCII text."""
    s = split()
    for task, (train, held) in s.items():
        assert not set(train) & set(held), task
        assert len(train) + len(held) == len(problems(task))
    assert s["days_in_month"][1] == s["leap_year"][1]
    assert is_leap(2000) and is_leap(2024) and not is_leap(1900) and not is_leap(2023)
    for y in range(FIRST_YEAR, LAST_YEAR + 1):
        assert is_leap(y) == (y % 4 == 0)  # the rule the model can learn, within the range
        for m in range(1, 13):
            nxt = datetime.date(y + (m == 12), m % 12 + 1, 1)
            assert days_in_month(y, m) == (nxt - datetime.date(y, m, 1)).days
    rng = random.Random(0)
    train = {t: pair[0] for t, pair in s.items()}
    for _ in range(2000):
        conv = training_sample(rng, train)
        for m in conv["messages"]:
            assert m["content"].isascii() and m["content"].isprintable()
    rows = heldout_set({t: 200 for t in TASKS})
    assert len({r["messages"][-1]["content"] for r in rows}) == len(rows)


if __name__ == "__main__":
    self_check()
    s = split()
    for task, (train, held) in s.items():
        print(f"{task:14s} {len(train):6d} training problems, {len(held):5d} held out")
    rng = random.Random(1)
    train = {t: pair[0] for t, pair in s.items()}
    for _ in range(6):
        print(training_sample(rng, train))
