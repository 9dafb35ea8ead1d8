"""``vendor`` (each streaming vendor in turn) and ``start`` (its fake server and provider)."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, AsyncIterator, Callable

import pytest

from roost.daemon.providers._base import Provider
from tests.daemon.providers._vendors import VENDORS, Vendor
from tests.fakes._http import FakeServer

Start = Callable[..., tuple[FakeServer, Any]]


@pytest.fixture(params=VENDORS, ids=lambda vendor: vendor.name)
def vendor(request: pytest.FixtureRequest) -> Vendor:
    """Each vendor in turn; a vendor's own test module overrides this with its one."""
    return request.param


@pytest.fixture
async def start(vendor: Vendor) -> AsyncIterator[Start]:
    """``start(script, **provider_kwargs) -> (server, provider)``; both closed at teardown."""
    providers: list[Provider] = []
    with ExitStack() as stack:

        def _start(script: list[Any], **kwargs: Any) -> tuple[FakeServer, Any]:
            server = stack.enter_context(vendor.serve(script))
            provider = vendor.provider(server.base_url, **kwargs)
            providers.append(provider)
            return server, provider

        try:
            yield _start
        finally:
            for provider in providers:
                await provider.aclose()
