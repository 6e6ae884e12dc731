"""Rows in exactly the schema verl's RL dataset reads, for GSM8K and DAPO-Math-17K.

The data_source field selects verl's real reward function: 'openai/gsm8k' scores the last
'#### n', 'math_dapo' the 'Answer:' line.
"""

from __future__ import annotations

from typing import Any

GSM8K_SOURCE = "openai/gsm8k"
GSM8K_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
DAPO_SOURCE = "math_dapo"
DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should be of the form "
    "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
)
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'


def gsm8k_answer_value(answer: str) -> str:
    """The number after the last '####', commas removed (as verl's gsm8k preprocessing does)."""
    if "####" not in answer:
        raise ValueError(f"a GSM8K answer must contain '####': {answer[-80:]!r}")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def gsm8k_row(question: str, answer: str, split: str, index: int) -> dict[str, Any]:
    return {
        "data_source": GSM8K_SOURCE,
        "prompt": [{"role": "user", "content": f"{question} {GSM8K_INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": gsm8k_answer_value(answer)},
        "extra_info": {"split": split, "index": index, "answer": answer, "question": question},
    }


def dapo_row(problem: str, answer: str, split: str, index: int) -> dict[str, Any]:
    return {
        "data_source": DAPO_SOURCE,
        "prompt": [{"role": "user", "content": f"{DAPO_PREFIX}{problem}{DAPO_SUFFIX}"}],
        "ability": "MATH",
        "reward_model": {"style": "rule-lighteval/MATH_v2", "ground_truth": str(answer)},
        "extra_info": {"split": split, "index": index},
    }
