"""The one redaction rule every place that shows text uses: the collector-down warning,
the doctor's table and the model adapters' exceptions."""

from __future__ import annotations

import pytest

from tracedagent._cli._main import _doctor
from tracedagent._core._secrets import MASK, MIN_SECRET_LENGTH, redact
from tracedagent.models._common import scrub_secrets


def test_every_occurrence_is_blanked_longest_first():
    text = "key abcd-efgh sent; abcd-efgh-ijkl refused; abcd-efgh again"
    assert redact(text, ["abcd-efgh", "abcd-efgh-ijkl"]) == f"key {MASK} sent; {MASK} refused; {MASK} again"


def test_values_shorter_than_the_minimum_are_left_alone():
    short = "x" * (MIN_SECRET_LENGTH - 1)
    assert redact(f"user {short} at host u", [short, "u", "", None]) == f"user {short} at host u"
    assert redact("token wxyz", ["wxyz"]) == f"token {MASK}"


def test_a_caller_can_demand_longer_secrets():
    assert redact("try `ollama pull`", ["ollama"], min_length=16) == "try `ollama pull`"
    assert redact("bad key sk-0123456789abcdef", ["sk-0123456789abcdef"], min_length=16) == f"bad key {MASK}"


@pytest.mark.parametrize("secret, shown", [("hunter2-hunter2", MASK), ("u", "u")])
def test_the_doctor_blanks_by_the_same_rule(secret, shown):
    check = _doctor.Check(name="x", url="http://127.0.0.1:1/", service="jaeger", secrets=frozenset({secret}),
                          probe=lambda timeout: _doctor.Outcome(reachable=False, detail=f"bad user {secret}"))
    (outcome,) = _doctor.run([check], timeout=1)
    assert outcome.detail == f"bad user {shown}"


def test_the_adapters_blank_long_keys_everywhere_in_the_exception_and_leave_placeholders():
    key = "sk-test-0123456789abcdef"
    exc = ValueError(f"Incorrect API key {key}; ollama says hi")
    exc.body = {"error": {"message": f"key {key}", "items": [key, 3]}}  # type: ignore[attr-defined]
    scrub_secrets(exc, [key, "ollama", None])
    assert str(exc) == f"Incorrect API key {MASK}; ollama says hi"
    assert exc.body == {"error": {"message": f"key {MASK}", "items": [MASK, 3]}}  # type: ignore[attr-defined]


@pytest.mark.parametrize("text, shown", [
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = ***"),
    ("https://api.example.com/v1?Password=hunter2hunter2&page=2", "https://api.example.com/v1?Password=***&page=2"),
    ("https://api.example.com/v1?API_KEY=abcd1234abcd1234", "https://api.example.com/v1?API_KEY=***"),
    ("curl -H 'Authorization: Basic c3ZjOlRyMHViNGRvciYz'", "curl -H 'Authorization: Basic ***'"),
    ("Authorization: BEARER abcdefghijklmnop", "Authorization: BEARER ***"),
    ("your password: hunter2", "your password: ***"),
    ("the secret: a good night's sleep", "the secret: a good night's sleep"),  # prose stays
    ("a basic understanding", "a basic understanding"),
])
def test_the_default_redactor_knows_secrets_by_their_names_in_any_case(text, shown):
    from tracedagent import Redactor

    assert Redactor()(text) == shown
