"""Web addresses as the permission rules and the ``web_fetch`` tool both see them.

One function makes a URL canonical, and both sides use its result: the rules decide on the
canonical URL, and the tool sends exactly that. So no difference between two URL parsers
can make a call fetch another address than the one a rule allowed. Canonical means: http or
https; no user name or password (``https://docs.python.org@evil.example/`` is refused, not
read one way here and another there); the host lower-cased, IDNA-encoded, an IPv4 address
only as four decimal numbers (``http://2130706433/`` is refused, not taken for 127.0.0.1),
an IPv6 one compressed in brackets; the default port dropped; an empty path ``/``; the
fragment dropped (it is never sent); anything but printable ASCII percent-encoded.
Whitespace, control characters and backslashes are refused.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from dataclasses import dataclass

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?")
_NUMERIC = re.compile(r"(0x[0-9a-f]*|[0-9]+)")
_REFUSED = re.compile(r"[\x00-\x20\x7f\\]")
# Kept as they are in a path or a query: RFC 3986's unreserved, sub-delims, ":", "@", "/",
# "?", and "%" (already-encoded text stays as it was).
_SAFE = "/?:@!$&'()*+,;=-._~%"


class UrlError(ValueError):
    """Not an address ``web_fetch`` fetches; the message says why."""


@dataclass(frozen=True, slots=True)
class WebAddress:
    """A canonical http(s) address."""

    #: The whole URL, as fetched and as the rules match it.
    url: str
    scheme: str
    #: Lower-case; an IPv6 address without its brackets.
    host: str
    port: int

    @property
    def origin(self) -> tuple[str, str, int]:
        """Scheme, host and port: what a redirect may not change unnoticed."""
        return self.scheme, self.host, self.port


def web_address(text: str) -> WebAddress:
    """``text`` as a canonical http(s) address.

    Raises:
        UrlError: not an http or https URL that can be fetched as it is written.
    """
    if not isinstance(text, str) or not text:
        raise UrlError("the URL is empty")
    if _REFUSED.search(text):
        raise UrlError("a URL must not hold spaces, control characters or backslashes")
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise UrlError(f"not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise UrlError(f"only http and https URLs are fetched, not {scheme or 'a URL without a scheme'}")
    if "@" in parts.netloc:
        raise UrlError("a URL with a user name or password is not fetched")
    host = _host(parts.hostname or "", "[" in parts.netloc)
    port = _DEFAULT_PORTS[scheme] if port is None else port
    shown_host = f"[{host}]" if ":" in host else host
    shown_port = "" if port == _DEFAULT_PORTS[scheme] else f":{port}"
    path = urllib.parse.quote(parts.path or "/", safe=_SAFE)
    query = f"?{urllib.parse.quote(parts.query, safe=_SAFE)}" if parts.query else ""
    return WebAddress(f"{scheme}://{shown_host}{shown_port}{path}{query}", scheme, host, port)


def _host(host: str, bracketed: bool) -> str:
    if not host:
        raise UrlError("the URL names no host")
    if bracketed:
        if "%" in host:
            raise UrlError(f"{host}: an IPv6 zone is not fetched")
        try:
            return ipaddress.IPv6Address(host).compressed
        except ValueError:
            raise UrlError(f"{host} is not an IPv6 address") from None
    try:
        host = host.rstrip(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise UrlError(f"{host} is not a host name") from None
    labels = host.split(".")
    if _NUMERIC.fullmatch(labels[-1]):
        # The resolver reads 0x7f.1, 017700000001 or 2130706433 as 127.0.0.1: only the
        # plain form is an address here, so that a rule on it means what it says.
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise UrlError(f"{host} is neither a host name nor an IPv4 address (a.b.c.d)") from None
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise UrlError(f"{host} is not a host name")
    return host
