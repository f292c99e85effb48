"""The one redaction rule every place that shows text uses: the collector-down warning,
the doctor's table and the model adapters' exceptions."""

from __future__ import annotations

import json

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


PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
       "aFDrBz9vFqU4yiRzBMFoPuwKBgQD3gq2FB0sJvJqb3yTqpRLhX\n-----END RSA PRIVATE KEY-----")
KEYS = {  # a credential of each shape (made up, of the right form), as it appears in text
    "pem": PEM,
    "pem-openssh": PEM.replace("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY"),
    "pem-encrypted": PEM.replace("RSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY"),
    "stripe-secret": "sk_live_51H8XYZabcdEFGHijklMNOPqrstUVWxyz0123456789",
    "stripe-restricted": "rk_live_51H8XYZabcdEFGHijklMNOPqrst",
    "sendgrid": "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",
    "twilio": "SK2f3a9c4e8b7d6a5f4e3d2c1b0a9f8e7d",
    "google": "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "npm": "npm_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R",
}


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_the_default_redactor_masks_each_credential_shape(kind):
    from tracedagent import Redactor

    key = KEYS[kind]
    for text in (f"key: {key}", f"use {key}, then", f'{{"note": "{key}"}}', json.dumps({"config": f"x {key} y"})):
        shown = Redactor()(text)
        assert key not in shown and MASK in shown, (kind, text, shown)
    assert key[8:-8] not in Redactor()(json.dumps(key)), "inside a JSON string, escaped newlines and all"


def test_a_private_key_cut_short_is_masked_to_the_end_and_the_text_around_a_key_stays():
    from tracedagent import Redactor

    assert Redactor()("before\n" + PEM[:120]) == f"before\n{MASK}"
    assert Redactor()(f"before\n{PEM}\nafter") == f"before\n{MASK}\nafter"


def test_an_azure_connection_strings_key_is_masked_and_the_rest_kept():
    from tracedagent import Redactor

    key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
    text = f"DefaultEndpointsProtocol=https;AccountName=orders;AccountKey={key};EndpointSuffix=core.windows.net"
    assert Redactor()(text) == ("DefaultEndpointsProtocol=https;AccountName=orders;AccountKey=***;"
                                "EndpointSuffix=core.windows.net")
    assert Redactor()(f"Endpoint=sb://x.servicebus.windows.net/;SharedAccessKey={key[:44]}") \
        == "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKey=***"


@pytest.mark.parametrize("text", [
    "Ask the task runner; SKU SK-1234 is out of stock",                  # SK, but not 32 hex digits after it
    "commit 2f3a9c4e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 and MASK2f3a9c4e8b7d6a5f4e3d2c1b0a9f8e7d",  # hex, no SK
    "the sk_live_ prefix marks Stripe's live keys; rk_live_ restricted ones",  # the prefixes alone
    "msg.SG.data is a field; SG.short.key is not a SendGrid key",
    "AIzawesome is not a word, and AIza alone is a prefix",
    "npm_config_cache=/tmp/npm and npm_package_version=1.2.3",            # npm's own variables
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
    "the private key stays with its owner; AccountName=orders;Protocol=https",
    '{"author": "Ann", "passage": "a password reset", "mask": "SKIP"}',  # secret words as values
])
def test_ordinary_text_near_those_shapes_is_left_alone(text):
    from tracedagent import Redactor

    assert Redactor()(text) == text


@pytest.mark.parametrize("text, shown", [
    ('{"password": {"value": "hunter2"}, "user": "svc"}', '{"password": "***", "user": "svc"}'),
    ('{"user": "svc", "api_key": ["k1", {"k": "]"}]}', '{"user": "svc", "api_key": "***"}'),
    ('{"user": "svc", "password": {"v": "hun}ter2"', '{"user": "svc", "password": "***"'),   # cut short
    ('{"payload": "{\\"password\\": \\"hunter2\\"}", "user": "svc"',                          # JSON in a string
     '{"payload": "{\\"password\\": \\"***\\"}", "user": "svc"'),
    ('{"token": null, "user": "svc"}', '{"token": null, "user": "svc"}'),
])
def test_json_text_has_whatever_a_secret_named_key_holds_masked_as_a_structure_would(text, shown):
    from tracedagent import Redactor

    assert Redactor()(text) == shown
