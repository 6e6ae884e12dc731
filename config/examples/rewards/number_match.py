"""An own reward function (verl's custom_reward_function): 1 when the last 'The answer is:' of the
response holds the ground truth's number, else 0. verl calls it with the row's data_source, the
response text, the ground truth and the row's extra_info."""

import re

MARKER = "The answer is:"


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    tail = solution_str.rsplit(MARKER, 1)[-1] if MARKER in solution_str else ""
    numbers = re.findall(r"-?\d+", tail)
    return 1.0 if numbers and numbers[0] == str(ground_truth).strip() else 0.0
