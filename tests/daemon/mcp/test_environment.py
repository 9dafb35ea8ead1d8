"""What a stdio MCP server gets of the dispatching client's environment, through a real
daemon and server-everything's ``get-env``: what TLS, proxies and the locale need, an
absolute PATH, no secret, and a proxy URL with a password only when the user's config
passes it. And a server that exits at start shows its last stderr lines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from roost.protocol.trio_client import TrioClient

from ..conftest import events_until, finished, text, user_dir, write, write_script
from .conftest import EVERYTHING_JS, everything

PROXY = "http://proxy.example:3128"
WITH_PASSWORD = "http://alice:s3cret@proxy.example:3128"


def _client_env(tmp_path: Path) -> dict[str, str]:
    ca = write(tmp_path / "ca" / "roots.pem", "not a real certificate\n")
    return {
        "PATH": f"./bin:{os.environ['PATH']}:relative/bin",
        "HOME": os.environ["HOME"],
        "SSL_CERT_FILE": str(ca),
        "SSL_CERT_DIR": str(ca.parent),
        "REQUESTS_CA_BUNDLE": str(ca),
        "NODE_EXTRA_CA_CERTS": str(ca),
        "HTTPS_PROXY": PROXY,
        "http_proxy": PROXY,
        "NO_PROXY": "localhost,127.0.0.1",
        "https_proxy": WITH_PASSWORD,
        "LANG": "C.UTF-8",
        "LC_TIME": "C",
        "GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "EDITOR": "vim",
    }


def _user_server(extra: str = "") -> None:
    everything()  # fails with the install hint when node or the server is missing
    write(user_dir() / "config.toml", f'{extra}[mcp.servers.ev]\ncommand = "node"\nargs = ["{EVERYTHING_JS}", "stdio"]\n')


async def _server_env(client: TrioClient, project: Path, env: dict[str, str]) -> dict[str, str]:
    use = {"type": "tool_use", "name": "ev__get-env", "input": {}}
    model = write_script(project, [use], [text("done")], name=f"s-{os.urandom(3).hex()}.json")
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), mode="full", attach=True, env=env)
    events = await events_until(client, finished(run["run"]), timeout=60)
    [result] = [e for e in events if e["type"] == "tool.finished"]
    assert not result["is_error"], result["result"]
    got: dict[str, str] = json.loads(result["result"])
    return got


async def _listed(client: TrioClient, project: Path, env: dict[str, str]) -> dict[str, Any]:
    servers = (await client.call("mcp.list", cwd=str(project), env=env))["servers"]
    return {s["name"]: s for s in servers}


async def test_a_stdio_server_gets_what_tls_and_proxies_need_and_no_secret(
    client: TrioClient, project: Path, tmp_path: Path
) -> None:
    _user_server()
    env = _client_env(tmp_path)
    got = await _server_env(client, project, env)
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "HTTPS_PROXY",
                 "http_proxy", "NO_PROXY", "LANG", "LC_TIME"):
        assert got.get(name) == env[name], name
    # The client's PATH, without the entries that would run the project's own programs.
    assert got["PATH"] == os.environ["PATH"]
    # No secret: not by name, not a proxy URL's password; nothing else of the client's.
    assert "GITHUB_TOKEN" not in got and "https_proxy" not in got and "EDITOR" not in got
    assert "s3cret" not in json.dumps(got)
    # mcp.list with the same client environment finds that very server, and its log says
    # what it was not given.
    server = (await _listed(client, project, env))["ev"]
    assert server["state"] == "ready" and server["stderr"] == []
    log = Path(server["log"]).read_text()
    assert "not passed to the server: https_proxy (a credential in the value" in log and "s3cret" not in log


async def test_a_proxy_with_a_password_passes_when_the_users_config_says_so(
    client: TrioClient, project: Path, tmp_path: Path
) -> None:
    _user_server('[tools.env]\npass = ["https_proxy"]\n\n')
    got = await _server_env(client, project, _client_env(tmp_path))
    assert got["https_proxy"] == WITH_PASSWORD and "GITHUB_TOKEN" not in got


async def test_a_projects_config_cannot_pass_a_secret_to_the_users_server_untrusted(
    client: TrioClient, project: Path, tmp_path: Path
) -> None:
    _user_server()
    write(project / ".roost" / "config.toml", '[tools.env]\npass = ["https_proxy", "GITHUB_TOKEN"]\n')
    got = await _server_env(client, project, _client_env(tmp_path))
    assert "https_proxy" not in got and "GITHUB_TOKEN" not in got


async def test_the_entrys_own_env_wins(client: TrioClient, project: Path, tmp_path: Path) -> None:
    everything()
    write(user_dir() / "config.toml", f'[mcp.servers.ev]\ncommand = "node"\nargs = ["{EVERYTHING_JS}", "stdio"]\n'
          'env = { HTTPS_PROXY = "http://other:8080", LANG = "de_DE.UTF-8" }\n')
    got = await _server_env(client, project, _client_env(tmp_path))
    assert (got["HTTPS_PROXY"], got["LANG"], got["LC_TIME"]) == ("http://other:8080", "de_DE.UTF-8", "C")


async def test_a_server_that_exits_at_start_shows_its_last_stderr_lines(client: TrioClient, project: Path) -> None:
    lines = "; ".join(f"echo 'line {n}' >&2" for n in range(12))
    write(user_dir() / "config.toml", '[mcp.servers.quits]\ncommand = "sh"\n'
          f'args = ["-c", "{lines}; echo \'Error: MY_API_KEY is not set\' >&2; exit 1"]\n')
    model = write_script(project, [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    await events_until(client, finished(run["run"]), timeout=60)
    server = (await _listed(client, project, dict(os.environ)))["quits"]
    assert server["state"] in ("failed", "starting")
    assert "closed the connection before it was ready" in server["error"]
    # The last eight, the server's own words (not our notes in its log).
    assert server["stderr"] == [f"line {n}" for n in range(5, 12)] + ["Error: MY_API_KEY is not set"]
