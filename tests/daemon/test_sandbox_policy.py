"""The sandbox's pure parts: the policy built in one place (the user chooses, a project only
narrows), the config and agent fields it comes from, the bwrap mounts it turns into, and the
note on a failure it caused."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from roost.daemon.folder._agents import AgentError, parse_agent
from roost.daemon.folder._config import ConfigError, load_config
from roost.daemon.folder._setup import load_folder, with_sandbox_paths
from roost.daemon.folder._trust import NO_TRUST
from roost.daemon.runs._settings import find_agent, sandbox_policy
from roost.daemon.sandbox import SandboxConfig, SandboxPolicy, _bwrap, build_policy, explain
from roost.daemon.sandbox._bwrap import mounts
from roost.daemon.sandbox._home import hidden_and_protected

HOME = "/home/u"


def policy(cwd: Path, **kwargs) -> SandboxPolicy:
    return build_policy(str(cwd), home=HOME, **kwargs)


def test_the_default_is_the_folder_writable_credentials_hidden_and_no_network(tmp_path: Path) -> None:
    p = policy(tmp_path, hidden=["/daemon/state"])
    assert (p.mode, p.writable, p.network, p.auto_allow, p.ignored) == ("workspace", (str(tmp_path),), False, False, ())
    hidden, _ = hidden_and_protected(p)
    for path in ("/daemon/state", f"{HOME}/.ssh", f"{HOME}/.aws", f"{HOME}/.gnupg", "/run/docker.sock"):
        assert path in hidden
    assert p.on and SandboxPolicy.from_map(p.to_map()) == p


def test_the_dispatch_beats_the_agent_which_beats_the_config(tmp_path: Path) -> None:
    user = SandboxConfig(mode="read-only")
    assert policy(tmp_path, user=user).mode == "read-only"
    assert policy(tmp_path, user=user, agent="workspace").mode == "workspace"
    assert policy(tmp_path, user=user, agent="workspace", dispatch="off").mode == "off"
    assert policy(tmp_path, dispatch="read-only").writable == ()


def test_user_paths_resolve_home_and_the_session_folder(tmp_path: Path) -> None:
    user = SandboxConfig(writable=("~/.cache", "../shared"), hide=("secrets",), network=True, auto_allow=True)
    p = policy(tmp_path / "proj", user=user)
    assert p.writable == (str(tmp_path / "proj"), f"{HOME}/.cache", str(tmp_path / "shared"))
    assert str(tmp_path / "proj" / "secrets") in p.hidden
    assert (p.network, p.auto_allow) == (True, True)


def test_a_project_can_narrow_but_never_widen(tmp_path: Path) -> None:
    wide = SandboxConfig(mode="off", network=True, auto_allow=True, writable=("/etc",), source="P", root="/p")
    p = policy(tmp_path, project=wide)
    assert (p.mode, p.network, p.auto_allow, p.writable) == ("workspace", False, False, (str(tmp_path),))
    assert p.ignored == ("mode off (P)", "network = true (P)", "auto_allow = true (P)", "writable /etc (P)")
    # What the user allowed, the project may take back.
    user = SandboxConfig(network=True, auto_allow=True, writable=("/srv/a", "/srv/b"))
    narrow = SandboxConfig(mode="read-only", network=False, auto_allow=False, writable=(), hide=("private",), source="P", root="/p")
    p = policy(tmp_path, user=user, project=narrow)
    assert (p.mode, p.network, p.auto_allow, p.writable, p.ignored) == ("read-only", False, False, (), ())
    assert "/p/private" in p.hidden
    kept = policy(tmp_path, user=user, project=SandboxConfig(writable=("/srv/b",), source="P", root="/p"))
    assert kept.writable == (str(tmp_path), "/srv/b")
    # Even the dispatch's off: a project that asks for a sandbox gets one.
    assert policy(tmp_path, project=SandboxConfig(mode="workspace", source="P"), dispatch="off").mode == "workspace"


def test_a_project_agent_may_only_narrow_a_users_agent_may_widen(tmp_path: Path) -> None:
    assert policy(tmp_path, agent="off").mode == "off"
    p = policy(tmp_path, agent="off", agent_source="/p/.roost/agents/x.md")
    assert (p.mode, p.ignored) == ("workspace", ("mode off (/p/.roost/agents/x.md)",))
    assert policy(tmp_path, agent="read-only", agent_source="/p/.roost/agents/x.md", dispatch="off").mode == "read-only"


def test_a_sub_agent_gets_its_callers_sandbox_or_narrower(tmp_path: Path) -> None:
    p = policy(tmp_path)
    assert p.narrowed(None, "a") is p and p.narrowed("workspace", "a") is p
    assert p.narrowed("read-only", "a").mode == "read-only" and p.narrowed("read-only", "a").writable == ()
    assert p.narrowed("off", "a.md") == SandboxPolicy(**{**_fields(p), "ignored": ("mode off (a.md)",)})
    # An off run keeps its lists, so that a sub-agent can turn the sandbox on.
    assert policy(tmp_path, dispatch="off").narrowed("workspace", "a").writable == (str(tmp_path),)


def _fields(p: SandboxPolicy) -> dict:
    return {name: getattr(p, name) for name in SandboxPolicy.__slots__}


@pytest.fixture
def elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """The private /tmp somewhere else: these tests' folders lie under the real /tmp."""
    monkeypatch.setattr(_bwrap, "PRIVATE_TMP", "/nonexistent-private-tmp")


def test_mounts_go_shallow_to_deep_hiding_wins_and_remounts_come_last(tmp_path: Path, elsewhere: None) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".netrc").write_text("x")
    (home / "state" / "proj").mkdir(parents=True)
    p = SandboxPolicy(
        writable=(str(home), str(home / "state" / "proj")),
        hidden=(str(home / ".ssh"), str(home / ".netrc"), str(home / "state"), str(home / "gone"), str(home)),
    )
    # home is both writable and hidden: hidden, with what it holds (nothing hides twice);
    # a writable folder inside it is mounted after it.
    assert mounts(p, str(home)) == [
        "--tmpfs", str(home),
        "--bind", str(home / "state" / "proj"), str(home / "state" / "proj"),
        "--remount-ro", str(home),
    ]
    p = SandboxPolicy(writable=(str(home),), hidden=(str(home / ".ssh"), str(home / ".netrc")))
    assert mounts(p, str(home)) == [
        "--bind", str(home), str(home),
        "--tmpfs", str(home / ".ssh"),
        "--ro-bind", "/dev/null", str(home / ".netrc"),
        "--remount-ro", str(home / ".ssh"),
    ]


def test_what_the_private_tmp_already_hides_is_not_mounted_again(tmp_path: Path) -> None:
    # tmp_path lies under /tmp: with nothing of it writable, nothing of it is visible.
    (tmp_path / ".ssh").mkdir()
    assert mounts(SandboxPolicy(hidden=(str(tmp_path / ".ssh"),)), "/") == []
    # A read-only session folder under /tmp stays visible.
    assert mounts(SandboxPolicy("read-only"), str(tmp_path)) == ["--ro-bind", str(tmp_path), str(tmp_path)]


WORKSPACE = SandboxPolicy(writable=("/p",), hidden=("/h/.ssh",))


@pytest.mark.parametrize(
    "output",
    [
        "touch: cannot touch '/usr/x': Read-only file system",
        "OSError: [Errno 30] Read-only file system: '/etc/x'",
        "bash: /srv/out: Permission denied",
    ],
)
def test_a_write_outside_gets_a_note(output: str) -> None:
    note = explain(output, 1, WORKSPACE, "/p")
    assert note is not None and "commands may write only in /p, a private /tmp" in note
    assert "sandbox (workspace)" in note


@pytest.mark.parametrize(
    "output",
    [
        "curl: (6) Could not resolve host: example.com",
        "ssh: connect to host x port 22: Network is unreachable",
        "socket.gaierror: [Errno -3] Temporary failure in name resolution",
        "ConnectionRefusedError: [Errno 111] Connection refused",
    ],
)
def test_no_network_gets_a_note(output: str) -> None:
    note = explain(output, 1, WORKSPACE, "/p")
    assert note is not None and "there is no network" in note
    assert explain(output, 1, SandboxPolicy(network=True), "/p") is None


def test_a_hidden_path_gets_a_note_relative_or_not() -> None:
    for output in ("cat: /h/.ssh/id_rsa: No such file or directory", "cat: ../h/.ssh/id_rsa: No such file or directory"):
        note = explain(output, 1, WORKSPACE, "/p")
        assert note is not None and "/h/.ssh is hidden" in note


def test_no_note_when_the_sandbox_is_not_why() -> None:
    assert explain("touch: cannot touch '/usr/x': Read-only file system", 0, WORKSPACE, "/p") is None
    assert explain("touch: cannot touch '/usr/x': Read-only file system", 1, SandboxPolicy("off"), "/p") is None
    assert explain("make: *** [all] Error 2", 2, WORKSPACE, "/p") is None
    assert explain("rm: cannot remove 'x': Permission denied", 1, WORKSPACE, "/p") is None
    assert explain("cat: /tmp/x: Permission denied", 1, WORKSPACE, "/p") is None


def test_read_only_says_the_folder_is_read_only() -> None:
    note = explain("touch: cannot touch 'x': Read-only file system", 1, SandboxPolicy("read-only"), "/p")
    assert note is not None and "the session folder is read-only; commands may write only in a private /tmp" in note


def test_sandbox_tables_are_read_from_both_files_and_checked(tmp_path: Path) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "roost" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[sandbox]\nmode = "read-only"\nwritable = ["~/.cache"]\nnetwork = true\nauto_allow = true\n')
    project = tmp_path / "proj"
    (project / ".roost").mkdir(parents=True)
    (project / ".roost" / "config.toml").write_text('[sandbox]\nnetwork = false\nhide = ["secrets"]\n')
    config = load_config(str(project))
    assert config.sandbox == SandboxConfig("read-only", ("~/.cache",), True, (), True, str(user), None)
    assert config.project_sandbox == SandboxConfig(
        None, None, False, ("secrets",), None, str(project / ".roost" / "config.toml"), str(project)
    )
    # Untrusted and all, a project's [sandbox] is read: it can only narrow.
    assert not config.widening
    for bad, message in (
        ('mode = "none"', "mode must be one of workspace, read-only, off"),
        ("network = 1", "network must be true or false"),
        ('writable = "/srv"', "writable must be a list of paths"),
        ("netwrok = false", "[sandbox] has no netwrok"),
    ):
        (project / ".roost" / "config.toml").write_text(f"[sandbox]\n{bad}\n")
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config(str(project))


def test_an_agents_sandbox_is_a_mode_and_a_bare_off_is_off() -> None:
    assert parse_agent("---\nsandbox: off\n---\nx", "a.md").sandbox == "off"
    assert parse_agent("---\nsandbox: read-only\n---\nx", "a.md").sandbox == "read-only"
    assert parse_agent("---\nname: a\n---\nx", "a.md").sandbox is None
    with pytest.raises(AgentError, match="sandbox must be one of workspace, read-only, off"):
        parse_agent("---\nsandbox: yes\n---\nx", "a.md")


def test_a_home_that_no_writable_folder_holds_is_hidden_but_for_its_toolchains(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for name in (".pyenv/versions", ".cargo/bin", ".ssh", "notes", "work/proj"):
        (home / name).mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n")
    p = build_policy(str(home / "work" / "proj"), home=str(home), user=SandboxConfig(readable=("~/notes",)))
    assert (p.home, p.hide_home) == (str(home), True)
    assert {str(home / n) for n in (".pyenv", ".cargo", ".gitconfig", "notes")} <= set(p.readable)
    assert str(home / ".ssh") in hidden_and_protected(p)[0] and str(home / ".ssh") not in p.readable
    # A project may not add to what is read.
    wide = SandboxConfig(readable=("~/.ssh",), source="P", root=str(home))
    q = build_policy(str(home / "work" / "proj"), home=str(home), project=wide)
    assert str(home / ".ssh") not in q.readable and q.ignored == ("readable ~/.ssh (P)",)


def test_a_session_that_holds_the_home_folder_protects_its_configuration(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    for cwd in (home, tmp_path):
        p = build_policy(str(cwd), home=str(home))
        assert not p.hide_home and p.readable == ()
        assert {str(home / n) for n in (".claude", ".bashrc", ".gitconfig", ".config", ".local/bin")} <= set(hidden_and_protected(p)[1])
    assert str(home / ".claude") in _protected_mounts(build_policy(str(home), home=str(home)), home)


def _protected_mounts(p: SandboxPolicy, cwd: Path) -> list[str]:
    args = mounts(p, str(cwd))
    return [args[i + 1] for i, a in enumerate(args) if a == "--ro-bind" and args[i + 1] == args[i + 2]]


def test_protected_paths_are_read_only_and_every_folder_that_holds_them_is_pinned(tmp_path: Path, elsewhere: None) -> None:
    proj = tmp_path / "proj"
    for name in (".git/hooks", ".git/info", ".git/modules/sub/hooks", ".git/worktrees/w", "deep/er/.git/hooks", ".claude"):
        (proj / name).mkdir(parents=True)
    for name in (".git/config", ".git/modules/sub/config", ".git/modules/sub/HEAD", ".git/worktrees/w/commondir", "deep/er/.git/config", ".mcp.json"):
        (proj / name).write_text("x")
    (proj / "wt").mkdir()
    (proj / "wt" / ".git").write_text("gitdir: /elsewhere\n")
    p = build_policy(str(proj), home="/nonexistent-home")
    inside = {str(proj / n) for n in (
        ".git/config", ".git/hooks", ".git/info", ".git/modules/sub/config", ".git/modules/sub/hooks",
        ".git/worktrees/w/commondir", "deep/er/.git/config", "deep/er/.git/hooks", ".claude", ".mcp.json", "wt/.git",
    )}
    assert inside <= set(p.protected)
    args = mounts(p, str(proj))
    assert inside <= set(_protected_mounts(p, proj))
    binds = {args[i + 1] for i, a in enumerate(args) if a == "--bind"}
    # Each folder between the session folder and a protected path is a mount point: it cannot be moved.
    assert {str(proj / n) for n in (".git", "deep", "deep/er", "deep/er/.git", ".git/modules", ".git/modules/sub", "wt")} <= binds
    # Read-only mode has nothing to protect inside; off mode keeps the list for the file tools.
    assert _protected_mounts(build_policy(str(proj), home="/x", dispatch="read-only"), proj) == [str(proj)]
    assert str(proj / ".git" / "config") in build_policy(str(proj), home="/x", dispatch="off").protected


def test_a_refused_change_to_a_protected_path_is_named() -> None:
    p = SandboxPolicy(writable=("/p",), protected=("/p/.git/config", "/p/.claude", "/h/.bashrc"))
    note = explain("bash: .git/config: Read-only file system\n", 1, p, "/p")
    assert note is not None and "/p/.git/config is protected" in note and "may write only" not in note
    moved = explain("mv: cannot move '.git' to 'x': Device or resource busy\n", 1, p, "/p")
    assert moved is not None and "/p/.git/config is protected" in moved


def test_a_setup_read_to_describe_a_folder_never_makes_a_sandbox(tmp_path: Path) -> None:
    # Listing agents or checking the config reads no sandbox paths (a walk of the whole
    # folder); a run's settings made from such a setup would hide and protect nothing, so
    # they are refused.
    nested = tmp_path / "vendor" / "lib"
    (nested / ".git").mkdir(parents=True)
    (nested / ".git" / "config").write_text("[core]\n")
    described = load_folder(str(tmp_path), dict(os.environ), NO_TRUST)
    assert described.sandbox_paths is None
    with pytest.raises(RuntimeError, match="without its sandbox's paths"):
        sandbox_policy(described, find_agent(described, None))
    ready = with_sandbox_paths(described, ["/daemon/state"])
    sandbox = sandbox_policy(ready, find_agent(ready, None))
    assert "/daemon/state" in sandbox.hidden
    assert str(nested / ".git" / "config") in sandbox.protected
