"""What ``--host`` names ([hosts.NAME] in config.toml, or a URL), and folders on a remote
machine (the real remote side: tests/e2e/test_remote.py)."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest

from roost.cli._connect import remote_folder
from roost.cli._hosts import Host, config_file, find_host, load_hosts
from roost.protocol import SshHost


def write_config(text: str) -> Path:
    path = Path(config_file())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_config_file_is_the_daemons_own() -> None:
    assert config_file() == os.path.join(os.environ["XDG_CONFIG_HOME"], "roost", "config.toml")


def test_named_hosts_come_from_config_in_order_and_a_url_needs_none() -> None:
    assert load_hosts() == {}
    write_config(
        'default_model = "scripted/demo"\n'
        '[hosts.build]\nurl = "ssh://me@build-box:2222"\nroost = "~/.local/bin/roost"\n'
        '[hosts.vm]\nurl = "ssh://vm"\n'
    )
    assert list(load_hosts()) == ["build", "vm"]
    assert find_host("build") == Host(SshHost("build-box", "me", 2222), "build", "~/.local/bin/roost")
    assert find_host("vm").label == "vm"
    assert find_host("ssh://other") == Host(SshHost("other"))
    assert find_host("ssh://other").label == "ssh://other"


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("nowhere", "'nowhere' is not an ssh:// URL, nor a host in"),
        ("tcp://box:1234", "over ssh:// only"),
        ("ssh://box/path", "--host: 'ssh://box/path': an ssh:// URL here names a machine only"),
    ],
)
def test_a_host_that_is_not_there_is_a_usage_error(given: str, says: str) -> None:
    write_config('[hosts.vm]\nurl = "ssh://vm"\n')
    with pytest.raises(click.UsageError, match=says):
        find_host(given)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[hosts", "config.toml: "),
        ("hosts = 3\n", r"\[hosts\] must be a table"),
        ("[hosts.a]\nroost = 'x'\n", r"\[hosts.a\] needs url"),
        ("[hosts.a]\nurl = 'ssh://a'\nport = 22\n", r"\[hosts.a\] has no port \(url, roost\)"),
        ("[hosts.a]\nurl = 'box'\n", r"\[hosts.a\]: 'box' is not an ssh:// URL"),
        ("[hosts.a]\nurl = 'ssh://a'\nroost = ''\n", "roost must be a command line"),
    ],
)
def test_a_wrong_host_entry_is_named(text: str, says: str) -> None:
    write_config(text)
    with pytest.raises(click.UsageError, match=says):
        load_hosts()


@pytest.mark.parametrize(
    ("given", "folder"),
    [
        (None, "/home/me"),
        ("~", "/home/me"),
        ("proj", "/home/me/proj"),
        ("~/src/../proj/", "/home/me/proj"),
        ("/srv/app", "/srv/app"),
        ("~bob/app", "~bob/app"),
    ],
)
def test_a_remote_folder_starts_at_the_remote_home(given: str | None, folder: str) -> None:
    assert remote_folder("/home/me", given) == folder


def test_a_daemon_that_does_not_say_its_home_expands_the_tilde_itself() -> None:
    assert remote_folder(None, None) == "~"
    assert remote_folder(None, "proj") == "~/proj"
    assert remote_folder(None, "/srv") == "/srv"
