"""What never leaves the study in a bundle: the values of secret-like settings (tokens, keys,
passwords), wherever a record or a log holds them."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"
# A word of the name, not a part of one: HF_TOKEN, RAY_AUTH_TOKEN, aws_secret_access_key, but not
# max_num_batched_tokens or a tokenizer.
SECRET_NAME = re.compile(
    r"(?:^|[^A-Za-z0-9])(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PASS|PAT|KEY|AUTH|CREDENTIALS?|API_?KEY|"
    r"ACCESS_?KEY|PRIVATE_?KEY)(?:$|[^A-Za-z0-9])"
    # SSHPASS, MYSQL_PWD: a password by its end (PWD alone is the working directory)
    r"|(?:PASS|_PWD)$",
    re.IGNORECASE,
)
# A URL's user info (user:password@): removed from every record and log, whatever the name around it.
URL_USER_INFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@'\"]+@")
# Names with a secret word that hold none: a tokenizer's special tokens, where a secret is kept, a
# budget of tokens.
NOT_SECRET_NAME = re.compile(
    r"^(?:pad|eos|bos|unk|sep|cls|mask|additional_special)_tokens?(?:_id)?$|_(?:PATH|FILE|DIR|ID|BUDGET)$",
    re.IGNORECASE,
)
# name=value, name: value, "name": "value", 'name': 'value' (shell, Hydra, YAML, JSON, Python reprs).
ASSIGNMENT = re.compile(r"""(["']?)([A-Za-z_][\w.-]*)\1(\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;}\]]+)""")
# Recognisable by their form alone: Hugging Face and GitHub tokens, HTTP bearer credentials.
TOKEN_FORMS = re.compile(r"\b(?:hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,})\b|(?<=Bearer )[A-Za-z0-9._~+/=-]{16,}")
# Shorter values are too likely to occur by chance in a log to be replaced wherever they appear.
MIN_SECRET_LENGTH = 8


def is_secret_name(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return bool(SECRET_NAME.search(last)) and not NOT_SECRET_NAME.search(last)


def could_be_secret(value: object) -> bool:
    """A string that is not a number or a placeholder: `token_budget: 16384` is a setting."""
    if not isinstance(value, str):
        return False
    text = value.strip("'\"")
    if not text or text == REDACTED or text.lower() in ("null", "none", "true", "false"):
        return False
    try:
        float(text)
    except ValueError:
        return True
    return False


def secret_values_of_environment(environ: Mapping[str, str] | None = None) -> set[str]:
    """The values of this process's secret-like variables: whatever recorded them is scrubbed."""
    variables = os.environ if environ is None else environ
    return {v for k, v in variables.items() if is_secret_name(k) and could_be_secret(v) and len(v) >= MIN_SECRET_LENGTH}


def strip_user_info(text: str) -> str:
    """https://user:password@host/... -> https://<redacted>@host/..."""
    return URL_USER_INFO.sub(lambda match: f"{match.group(1)}{REDACTED}@", text)


def redact_record(value: Any, found: set[str]) -> Any:
    """A JSON record with every secret-like key's value replaced and every URL's user info removed;
    the values replaced are added to `found`, so the logs that may repeat them are scrubbed too."""
    if isinstance(value, str):
        return strip_user_info(value)
    if isinstance(value, dict):
        redacted = {}
        for key, item in value.items():
            if is_secret_name(str(key)) and could_be_secret(item):
                if len(item) >= MIN_SECRET_LENGTH:
                    found.add(item)
                redacted[key] = REDACTED
            else:
                redacted[key] = redact_record(item, found)
        return redacted
    if isinstance(value, list):
        return [redact_record(item, found) for item in value]
    return value


def scrub_text(text: str, values: Iterable[str]) -> str:
    """A log or script with secret-like assignments, known secret values and token-shaped words replaced."""

    def assignment(match: re.Match[str]) -> str:
        quote, name, separator, value = match.groups()
        if not (is_secret_name(name) and could_be_secret(value)):
            return match.group(0)
        quoted = value[0] if value[0] in "'\"" else ""
        return f"{quote}{name}{quote}{separator}{quoted}{REDACTED}{quoted}"

    text = ASSIGNMENT.sub(assignment, text)
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return strip_user_info(TOKEN_FORMS.sub(REDACTED, text))
