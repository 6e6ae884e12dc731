"""Deterministic toy problems in the shape of GSM8K and DAPO-Math-17K, for the local site.

They carry exact answers, so verl's real reward functions score them; the tiny random model will
not solve them, which is fine: the study measures systems behaviour with lr 0.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

NAMES = ["Ava", "Ben", "Chen", "Dana", "Eli", "Fatima", "Goran", "Hana", "Ivo", "Jun", "Kai", "Lea"]
ITEMS = ["apples", "books", "coins", "marbles", "pencils", "stamps", "tickets", "shells"]


def gsm8k_problem(rng: random.Random) -> tuple[str, str, int]:
    """(question, worked answer ending in '#### n', n)"""
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    start, bought, given = rng.randint(5, 60), rng.randint(2, 40), rng.randint(1, 30)
    groups = rng.randint(2, 6)
    total = (start + bought - given) * groups
    question = (
        f"{name} has {start} {item}. {name} buys {bought} more and gives away {given}. "
        f"Then {name} collects {groups} times as many {item} as that. How many {item} does {name} have?"
    )
    answer = (
        f"{name} has {start} + {bought} - {given} = {start + bought - given} {item}. "
        f"Then {start + bought - given} * {groups} = {total}.\n#### {total}"
    )
    return question, answer, total


def dapo_problem(rng: random.Random) -> tuple[str, int]:
    """(problem, integer answer) in the style of competition problems."""
    kind = rng.randrange(3)
    if kind == 0:
        a, b, m = rng.randint(2, 9), rng.randint(10, 99), rng.randint(7, 31)
        return f"Find the remainder when ${a}^{{{b}}}$ is divided by ${m}$.", pow(a, b, m)
    if kind == 1:
        n = rng.randint(5, 40)
        return f"What is the sum of all positive divisors of ${n}$?", sum(d for d in range(1, n + 1) if n % d == 0)
    p, q = rng.randint(2, 12), rng.randint(2, 12)
    return (
        f"The roots of $x^2 - {p + q}x + {p * q} = 0$ are $r$ and $s$. Compute $r^2 + s^2$.",
        p * p + q * q,
    )


def gsm8k_rows(seed: int, count: int) -> Iterator[tuple[str, str, int]]:
    rng = random.Random(f"gsm8k-{seed}")
    for _ in range(count):
        yield gsm8k_problem(rng)


def dapo_rows(seed: int, count: int) -> Iterator[tuple[str, int]]:
    rng = random.Random(f"dapo-{seed}")
    for _ in range(count):
        yield dapo_problem(rng)


def corpus(seed: int, count: int = 400) -> Iterator[str]:
    """Text for training the local tokenizer: what the datasets' prompts and answers look like."""
    from rlvr_scaling.inputs.verl_rows import DAPO_PREFIX, DAPO_SUFFIX, GSM8K_INSTRUCTION

    for question, answer, _ in gsm8k_rows(seed, count):
        yield f"{question} {GSM8K_INSTRUCTION}"
        yield answer
    for problem, value in dapo_rows(seed, count):
        yield f"{DAPO_PREFIX}{problem}{DAPO_SUFFIX}"
        yield f"Answer: {value}"
