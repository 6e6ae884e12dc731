"""An own reward function (verl's custom_reward_function): 1 when the response's final answer is the
ground truth's number, else 0. verl calls it with the row's data_source, the response text, the ground
truth and the row's extra_info.

The final answer is read from the common shapes a model writes it in: the last `\\boxed{...}`, else the
text after the last "answer is" (with or without a colon), else the response's last number. Numbers
are compared by value: a sign, thousands separators and a trailing period do not matter ("The answer
is 1,250." scores against 1250), 3.50 equals 3.5, and a fraction is one number, equal to every other
form of it ("10/16", "5/8", "\\frac{5}{8}" and 0.625 all score against the ground truth 5/8), as the
workflow's `{rule: number}` reads it.
"""

import re
from fractions import Fraction

_SIGN = "[-+\u2212]"
FRACTION = re.compile(
    rf"(?P<num>{_SIGN}?\d+)\s*/\s*(?P<den>{_SIGN}?\d+)(?![\d.,]*\d)"
    rf"|(?P<lsign>{_SIGN}?)\\d?frac\{{\s*(?P<lnum>{_SIGN}?\d+)\s*\}}\{{\s*(?P<lden>{_SIGN}?\d+)\s*\}}"
)
NUMBER = re.compile(rf"{FRACTION.pattern}|{_SIGN}?(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?|{_SIGN}?\.\d+")
MARKER = re.compile(r"answer is\s*:?", re.IGNORECASE)


def value(number):
    """'+1,250.00' -> 1250, '-0.50' -> -1/2, '10/16' -> 5/8, '\\frac{-1}{3}' -> -1/3; None for x/0."""
    fraction = FRACTION.fullmatch(number.strip())
    if fraction is None:
        return Fraction(number.replace(",", "").replace("\u2212", "-"))
    numerator, denominator = (
        (fraction["num"], fraction["den"]) if fraction["num"] else (fraction["lnum"], fraction["lden"])
    )
    numerator, denominator = (int(part.replace("\u2212", "-")) for part in (numerator, denominator))
    if denominator == 0:
        return None
    negative = (fraction["lsign"] or "").startswith(("-", "\u2212"))
    return Fraction(-numerator if negative else numerator, denominator)


def final_answer(text):
    boxed = text.rfind("\\boxed{")
    if boxed >= 0:
        start = boxed + len("\\boxed{")
        depth = 1
        for position in range(start, len(text)):  # braces matched: \\boxed{\\frac{5}{8}}
            depth += {"{": 1, "}": -1}.get(text[position], 0)
            if depth == 0:
                return text[start:position]
        return text[start:]
    markers = list(MARKER.finditer(text))
    return text[markers[-1].end() :] if markers else text


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    answer = final_answer(solution_str)
    numbers = [found.group() for found in NUMBER.finditer(answer)]
    truth = [found.group() for found in NUMBER.finditer(str(ground_truth))]
    if not numbers or not truth:
        return 0.0
    # After a marker or in a box, the first number; in free text, the last one.
    picked = value(numbers[-1] if answer is solution_str else numbers[0])
    return 1.0 if picked is not None and picked == value(truth[0]) else 0.0
