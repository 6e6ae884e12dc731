"""An own reward function (verl's custom_reward_function): 1 when the response's final answer is the
ground truth's number, else 0. verl calls it with the row's data_source, the response text, the ground
truth and the row's extra_info.

The final answer is read from the common shapes a model writes it in: the last `\\boxed{...}`, else the
text after the last "answer is" (with or without a colon), else the response's last number. A number
is compared in one written form: a sign, thousands separators and a trailing period do not matter
("The answer is 1,250." scores against 1250), and 3.50 equals 3.5.
"""

import re

NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")
MARKER = re.compile(r"answer is\s*:?", re.IGNORECASE)


def canonical(number):
    """'+1,250.00' -> '1250', '-0.50' -> '-0.5'."""
    negative = number.startswith("-")
    whole, _, fraction = number.lstrip("+-").replace(",", "").partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    written = f"{whole}.{fraction}" if fraction else whole
    return f"-{written}" if negative and written != "0" else written


def final_answer(text):
    boxed = text.rfind("\\boxed{")
    if boxed >= 0:
        closing = text.find("}", boxed)
        return text[boxed + len("\\boxed{") : closing if closing >= 0 else None]
    markers = list(MARKER.finditer(text))
    return text[markers[-1].end() :] if markers else text


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    answer = final_answer(solution_str)
    numbers = NUMBER.findall(answer)
    if not numbers:
        return 0.0
    # After a marker or in a box, the first number; in free text, the last one.
    picked = numbers[-1] if answer is solution_str else numbers[0]
    truth = NUMBER.findall(str(ground_truth))
    return 1.0 if truth and canonical(picked) == canonical(truth[0]) else 0.0
