"""Canonical web addresses: what a web_fetch rule matches is what the tool fetches."""

from __future__ import annotations

import pytest

from roost.loop import UrlError, web_address


@pytest.mark.parametrize(
    "given, url",
    [
        ("https://docs.python.org/3/library/", "https://docs.python.org/3/library/"),
        ("HTTPS://Docs.Python.ORG", "https://docs.python.org/"),
        ("http://example.com:80/a?b=c#frag", "http://example.com/a?b=c"),
        ("https://example.com:8443/x", "https://example.com:8443/x"),
        ("http://127.0.0.1:8000/page", "http://127.0.0.1:8000/page"),
        ("http://[0:0::1]:9/", "http://[::1]:9/"),
        ("https://bücher.example/straße", "https://xn--bcher-kva.example/stra%C3%9Fe"),
        ("https://example.com/a%20b?q=%2F", "https://example.com/a%20b?q=%2F"),
        ("https://example.com./", "https://example.com/"),
    ],
)
def test_urls_are_made_canonical(given: str, url: str) -> None:
    assert web_address(given).url == url


def test_an_address_knows_its_origin() -> None:
    address = web_address("https://Example.com/x")
    assert (address.scheme, address.host, address.port, address.origin) == (
        "https", "example.com", 443, ("https", "example.com", 443)
    )
    assert web_address("http://[::1]:8080/").host == "::1"


@pytest.mark.parametrize(
    "given, why",
    [
        ("ftp://example.com/f", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("example.com/page", "without a scheme"),
        ("https://docs.python.org@evil.example/", "user name or password"),
        ("https://user:pw@example.com/", "user name or password"),
        ("https:///path", "no host"),
        ("http://2130706433/", "neither a host name nor an IPv4 address"),
        ("http://0x7f.1/", "neither a host name nor an IPv4 address"),
        ("http://127.000.0.1/", "neither a host name nor an IPv4 address"),
        ("https://exa mple.com/", "spaces"),
        ("https://example.com\\@evil.example/", "backslashes"),
        ("https://example.com/\n", "control characters"),
        ("http://example.com:99999/", "not a URL"),
        ("http://[fe80::1%25eth0]/", "zone"),
        ("http://a..b/", "not a host name"),
        ("", "empty"),
    ],
)
def test_what_is_not_fetched_says_why(given: str, why: str) -> None:
    with pytest.raises(UrlError, match=why):
        web_address(given)
