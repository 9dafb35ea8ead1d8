"""Each provider over HTTPS (httpx2's own transport, not the lean plain one) against its fake
behind a certificate of its own, which the daemon trusts because ``SSL_CERT_FILE`` names
it, as a user with a private CA or a TLS-terminating gateway would set it up."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.daemon.providers._base import ProviderError
from tests.daemon.providers._vendors import HI, Deltas, Vendor
from tests.fakes._http import self_signed


async def test_a_provider_streams_from_a_server_whose_certificate_ssl_cert_file_names(
    vendor: Vendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, tls = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with vendor.serve([vendor.text(["over ", "tls"]), vendor.text(["again"])], tls=tls) as server:
        assert server.base_url.startswith("https://127.0.0.1:")
        provider = vendor.provider(server.base_url)
        try:
            first = await provider.stream(HI, Deltas())
            second = await provider.stream(HI, Deltas())
        finally:
            await provider.aclose()
    assert first.content == ({"type": "text", "text": "over tls"},)
    assert second.content == ({"type": "text", "text": "again"},)
    # The connection, handshake and all, is kept between calls.
    assert len(server.requests) == 2 and server.connections == 1


async def test_a_certificate_nothing_trusts_is_refused(
    vendor: Vendor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, tls = self_signed(tmp_path)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with vendor.serve([vendor.text(["never"])], tls=tls) as server:
        # Not tried again: a refused certificate stays refused (the SDK retries a failed
        # connection, with pauses).
        provider = vendor.provider(server.base_url, **({"max_retries": 0} if vendor.name == "anthropic" else {}))
        try:
            with pytest.raises(ProviderError, match="(?i)certificate|ssl|connect"):
                await provider.stream(HI, Deltas())
        finally:
            await provider.aclose()
    assert server.requests == []
