"""Deterministic toy problems in the shape of GSM8K's and DAPO-Math-17K's upstream rows, for the local
site (a dataset's `source: synthetic` with its `generator`): the data stage builds verl's rows from
them exactly as from the upstream files, by the dataset's entry in the study config.

They carry exact answers, so verl's real reward functions score them; the tiny random model will
not solve them, which is fine: the study measures systems behaviour with lr 0.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

# The instruction config/config.yaml's GSM8K prompt adds, and the frame DAPO-Math-17K's published
# prompts carry (the local tokenizer is trained on this text).
GSM8K_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
)
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'
# Rows per split of a generated dataset.
ROWS = {"train": 512, "val": 32}
GENERATORS = ("gsm8k", "dapo_math")

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
    for question, answer, _ in gsm8k_rows(seed, count):
        yield f"{question} {GSM8K_INSTRUCTION}"
        yield answer
    for problem, value in dapo_rows(seed, count):
        yield f"{DAPO_PREFIX}{problem}{DAPO_SUFFIX}"
        yield f"Answer: {value}"


def _upstream_record(generator: str, item: tuple) -> dict[str, Any]:
    if generator == "gsm8k":
        question, answer, _ = item
        return {"question": question, "answer": answer}
    problem, value = item
    return {
        "prompt": [{"role": "user", "content": f"{DAPO_PREFIX}{problem}{DAPO_SUFFIX}"}],
        "reward_model": {"ground_truth": str(value)},
    }


def records(generator: str, seed: int) -> dict[str, list[dict[str, Any]]]:
    """train and val records in the upstream's shape: consecutive problems of one seeded stream."""
    if generator not in GENERATORS:
        raise ValueError(f"unknown generator {generator!r} (known: {', '.join(GENERATORS)})")
    stream = gsm8k_rows if generator == "gsm8k" else dapo_rows
    items = list(stream(seed, sum(ROWS.values())))
    split_records, offset = {}, 0
    for split, count in ROWS.items():
        split_records[split] = [_upstream_record(generator, item) for item in items[offset : offset + count]]
        offset += count
    return split_records
