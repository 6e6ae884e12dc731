"""A run's steps are a measurement only when they are exactly steps 1..N, once each, with every value a number
and every timing finite and positive. Broken files give an INVALID verdict naming the step and key, or a
clear error: never a traceback, never a silent number (the launcher, summaries and `metrics` share the rules)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
from pathlib import Path

import pytest
from rlvr_scaling.analysis.per_run.summary import validity_checks
from rlvr_scaling.cli import main
from rlvr_scaling.measured.metrics_file import REQUIRED_STEP_KEYS, measurement_problems, read_metrics_jsonl

from .test_metrics import step_fields

STEPS = 6
RUN = {"steps": STEPS, "prompts": 2, "responses_per_prompt": 4, "trajectories": 8, "max_response_length": 64}
STUDY = {"algorithm": {"lr": 0.0}}


def good_lines() -> list[str]:
    lines = []
    for step in range(1, STEPS + 1):
        fields = step_fields(step, 2.0 + step / 10, tokens=8 * 120)
        fields.update({"prompt_length/mean": 20.0, "response_length/mean": 100.0, "response_length/max": 64})
        lines.append(json.dumps({"step": step, "data": fields}))
    return lines


def write(tmp_path: Path, content: str | bytes, name: str = "metrics.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def run_cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["metrics", *argv])
    return code, out.getvalue() + err.getvalue()


def test_a_complete_run_is_valid(tmp_path: Path) -> None:
    path = write(tmp_path, "\n".join(good_lines()) + "\n")
    steps, problems = read_metrics_jsonl(path)
    assert measurement_problems(steps, problems, STEPS) == []
    assert all(c.passed for c in validity_checks(RUN, STUDY, steps, problems, {}))
    code, output = run_cli(str(path), "--steps", str(STEPS))
    assert code == 0 and "INVALID" not in output


def _failed_checks(lines: list[str], run: dict, study: dict, tmp_path: Path) -> list[str]:
    steps, problems = read_metrics_jsonl(write(tmp_path, "\n".join(lines) + "\n"))
    return [c.name for c in validity_checks(run, study, steps, problems, {}) if not c.passed]


def test_a_run_made_with_another_learning_rate_is_no_measurement_of_this_study(tmp_path: Path) -> None:
    # verl logged lr 1e-6 on every step; the study configures 0.0 (and the other way round).
    other_lr = [line.replace('"actor/lr": 0.0', '"actor/lr": 1e-06') for line in good_lines()]
    assert _failed_checks(other_lr, RUN, STUDY, tmp_path) == ["actor_lr"]
    assert _failed_checks(good_lines(), RUN, {"algorithm": {"lr": 1e-6}}, tmp_path) == ["actor_lr"]
    # One step with another lr is enough.
    one_step = [*good_lines()[:3], other_lr[3], *good_lines()[4:]]
    assert _failed_checks(one_step, RUN, STUDY, tmp_path) == ["actor_lr"]


def test_a_run_with_another_batch_is_no_measurement_of_this_study(tmp_path: Path) -> None:
    # Every step's tokens over the per-sample means give 8 trajectories (2 prompts x 4 responses).
    assert _failed_checks(good_lines(), RUN, STUDY, tmp_path) == []
    # The same steps for a run that asked for 4 prompts x 4 responses: 8 measured, 16 expected.
    bigger = {**RUN, "prompts": 4, "trajectories": 16}
    assert _failed_checks(good_lines(), bigger, STUDY, tmp_path) == ["trajectories"]
    # A step that generated twice the tokens: 16 trajectories measured on it.
    doubled = json.loads(good_lines()[2])
    doubled["data"]["perf/total_num_tokens"] *= 2
    lines = [*good_lines()[:2], json.dumps(doubled), *good_lines()[3:]]
    assert _failed_checks(lines, RUN, STUDY, tmp_path) == ["trajectories"]


def mutate_value(lines: list[str], step: int, key: str, text: str) -> str:
    record = json.loads(lines[step - 1])
    record["data"][key] = "__VALUE__"
    lines = list(lines)
    lines[step - 1] = json.dumps(record).replace('"__VALUE__"', text)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        # a duplicated step used to keep its last record and stay valid
        (lambda ls: "\n".join([*ls[:3], ls[1].replace("2.2", "19.58"), *ls[3:]]) + "\n", "step 2 appears again"),
        (lambda ls: "\n".join(ls[:3] + ls[4:]) + "\n", "missing 4"),  # steps 1, 2, 3, 5, 6
        (lambda ls: "\n".join(ls[:5]) + "\n", "missing 6"),  # fewer steps than configured
        (lambda ls: mutate_value(ls, 3, "timing_s/step", "-1.5"), "step 3: timing_s/step = -1.5"),
        (lambda ls: mutate_value(ls, 3, "timing_s/gen", "NaN"), "step 3: timing_s/gen = nan"),
        (lambda ls: mutate_value(ls, 4, "timing_s/step", "Infinity"), "step 4: timing_s/step = inf"),
        (lambda ls: mutate_value(ls, 2, "perf/total_num_tokens", '"many"'), "step 2: perf/total_num_tokens = 'many'"),
        (lambda ls: mutate_value(ls, 5, "timing_s/update_actor", "null"), "step 5: timing_s/update_actor = None"),
        (lambda ls: "\n".join(ls).replace('"step": 2,', '"step": Infinity,') + "\n", "line 2: step inf"),
        (lambda ls: "\n".join(ls).replace('"step": 2,', '"step": "2",') + "\n", "line 2: step '2'"),
        # finite, but their sums and squares overflow the statistics: refused, not a traceback
        (lambda ls: mutate_value(ls, 3, "timing_s/step", "1.5e308"), "step 3: timing_s/step = 1.5e+308"),
        (lambda ls: mutate_value(ls, 2, "perf/max_memory_allocated_gb", "1e300"), "step 2: perf/max_memory"),
    ],
    ids=[
        "duplicate",
        "gap",
        "short",
        "negative",
        "nan",
        "infinity",
        "string",
        "null",
        "step-inf",
        "step-str",
        "near-float-max",
        "huge-other",
    ],  # fmt: skip
)
def test_a_broken_measurement_is_invalid_and_named(tmp_path: Path, content, expected: str) -> None:
    path = write(tmp_path, content(good_lines()))
    steps, problems = read_metrics_jsonl(path)
    found = measurement_problems(steps, problems, STEPS)
    assert any(expected in p for p in found), found
    checks = validity_checks(RUN, STUDY, steps, problems, {})
    assert not next(c for c in checks if c.name == "measurement").passed
    code, output = run_cli(str(path), "--steps", str(STEPS))
    assert code == 1 and "INVALID measurement" in output and expected in output, output


def test_non_utf8_and_binary_files_are_named_not_crashed_on(tmp_path: Path) -> None:
    lines = good_lines()
    broken = write(tmp_path, ("\n".join(lines[:2]) + "\n").encode() + b'{"step": 3, "data": {"\xff\xfe": 1}}\n')
    code, output = run_cli(str(broken))
    assert code == 1 and "line 3: not UTF-8 text" in output, output
    garbage = write(tmp_path, bytes(random.Random(1).randrange(256) for _ in range(4096)), "garbage.bin")
    code, output = run_cli(str(garbage))
    assert code == 2 and "holds no verl step record" in output and "4096 bytes" in output, output
    empty = write(tmp_path, b"", "empty.log")
    code, output = run_cli(str(empty))
    assert code == 2 and "empty" in output, output


def finite(value: float) -> bool:
    """A number a run can log: finite and at most 10^15 in size (a larger one overflows statistics)."""
    try:
        return math.isfinite(value) and -(10**15) <= value <= 10**15
    except OverflowError:  # an integer no float can hold
        return False


def independently_valid(content: bytes) -> bool:
    """The rules written again, plainly: each non-blank line a UTF-8 JSON step record, steps exactly 1..STEPS
    once each, required figures finite and positive, other durations finite and not negative, every other
    value a number (finite and within 10^15) or null."""
    seen = []
    for raw in content.split(b"\n"):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
            step, data = record["step"], dict(record["data"])
        except (ValueError, KeyError, TypeError):
            return False
        if type(step) is not int:
            return False
        seen.append(step)
        for key, value in data.items():
            if key in REQUIRED_STEP_KEYS:
                if type(value) not in (int, float) or not (finite(value) and value > 0):
                    return False
            elif value is None:  # verl's writer logs NaN as null
                continue
            elif type(value) not in (int, float):
                return False
            elif key.startswith(("timing_s/", "timing_per_token_ms/")) and not (finite(value) and value >= 0):
                return False
            elif math.isfinite(value) if type(value) is float else True:
                if not finite(value):
                    return False
        if any(key not in data for key in REQUIRED_STEP_KEYS):
            return False
    return sorted(seen) == list(range(1, STEPS + 1))


def mutants(count: int, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    base = good_lines()
    values = ["NaN", "Infinity", "-Infinity", "-1", "0", '"x"', "null", "true", "1e400", "[]", "2.5", "9" * 400]
    out = []
    for _ in range(count):
        lines = list(base)
        kind = rng.randrange(8)
        if kind == 0:  # truncated anywhere
            text = ("\n".join(lines) + "\n").encode()
            out.append(text[: rng.randrange(len(text) + 1)])
            continue
        if kind == 1:  # a line repeated
            i = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
        elif kind == 2:  # a line lost
            del lines[rng.randrange(len(lines))]
        elif kind == 3:  # two lines swapped (still a complete measurement)
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == 4:  # one value replaced
            step = rng.randrange(1, STEPS + 1)
            key = rng.choice(list(json.loads(lines[step - 1])["data"]))
            lines = mutate_value(lines, step, key, rng.choice(values)).rstrip("\n").split("\n")
        elif kind == 5:  # the step number replaced
            i = rng.randrange(len(lines))
            lines[i] = lines[i].replace(f'"step": {i + 1},', f'"step": {rng.choice(values)},', 1)
        elif kind == 6:  # random bytes inside a line
            i = rng.randrange(len(lines))
            cut = rng.randrange(len(lines[i]))
            noise = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
            text = "\n".join(lines).encode()
            start = sum(len(x) + 1 for x in lines[:i]) + cut
            out.append(text[:start] + noise + text[start:])
            continue
        else:  # nothing but noise
            out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 512))))
            continue
        out.append(("\n".join(lines) + "\n").encode())
    return out


def test_mutated_metrics_files_give_a_verdict_or_a_clear_error_never_a_traceback(tmp_path: Path) -> None:
    outcomes = {0: 0, 1: 0, 2: 0}
    for number, content in enumerate(mutants(300)):
        path = write(tmp_path, content, f"m{number}.jsonl")
        code, output = run_cli(str(path), "--steps", str(STEPS))  # an exception here fails the test
        assert code in outcomes and "Traceback" not in output, (number, code, output[-500:])
        outcomes[code] += 1
        assert (code == 0) == independently_valid(content), (number, code, content[:300], output[-800:])
        if code == 1:
            assert "INVALID measurement" in output
        steps, problems = read_metrics_jsonl(path)
        checks = validity_checks(RUN, STUDY, steps, problems, {})  # never raises on a broken record either
        assert next(c for c in checks if c.name == "measurement").passed == (code == 0)
    # the mutants reach every outcome: valid (e.g. swapped lines), INVALID, and no step at all
    assert all(outcomes.values()), outcomes


def test_what_verl_legitimately_logs_stays_valid(tmp_path: Path) -> None:
    lines = good_lines()
    lines = mutate_value(lines, 2, "critic/score/mean", "null").rstrip("\n").split("\n")  # NaN, as verl writes it
    lines = mutate_value(lines, 3, "timing_per_token_ms/adv", "0.0").rstrip("\n").split("\n")  # a phase without tokens
    lines = mutate_value(lines, 4, "actor/grad_norm", "NaN").rstrip("\n").split("\n")
    path = write(tmp_path, "\n".join(lines) + "\n")
    steps, problems = read_metrics_jsonl(path)
    assert measurement_problems(steps, problems, STEPS) == []
    assert run_cli(str(path), "--steps", str(STEPS))[0] == 0


def test_huge_numbers_are_named_not_crashed_on(tmp_path: Path) -> None:
    huge = "9" * 400  # an integer no float can hold
    path = write(tmp_path, mutate_value(good_lines(), 2, "timing_s/step", huge))
    code, output = run_cli(str(path))
    assert code == 1 and "step 2: timing_s/step" in output, output[-500:]
    # a step number far beyond the run, without --steps: named, without listing every missing step
    far = write(tmp_path, json.dumps({"step": 10**12, "data": json.loads(good_lines()[0])["data"]}) + "\n", "far.jsonl")
    code, output = run_cli(str(far))
    assert code == 1 and "missing 1, 2, 3" in output and "more" in output, output[-500:]
