"""Claude Code's files where Claude Code keeps them: the project root."""

from __future__ import annotations

import os
from pathlib import Path

from roost.daemon._project import project_root
from roost.protocol.trio_client import TrioClient


def home() -> Path:
    return Path(os.environ["HOME"])


def write(path: Path, content: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def test_the_project_root_is_found_by_version_control_first(tmp_path: Path) -> None:
    (home() / ".claude").mkdir()
    notes = home() / "work" / "notes"
    notes.mkdir(parents=True)
    # No version control, no marker but the user's ~/.claude: the folder itself, not $HOME.
    assert project_root(str(notes)) == notes
    repo = home() / "work" / "repo"
    (repo / "sub" / ".claude").mkdir(parents=True)
    (repo / "sub" / "deep").mkdir()
    (repo / ".git").mkdir()
    assert project_root(str(repo / "sub" / "deep")) == repo
    worktree = home() / "work" / "wt"
    (worktree / "src").mkdir(parents=True)
    (worktree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    assert project_root(str(worktree / "src")) == worktree
    for marker in (".hg", ".jj"):
        other = tmp_path / marker.strip(".") / "a"
        other.mkdir(parents=True)
        (other.parent / marker).mkdir()
        assert project_root(str(other)) == other.parent
    plain = home() / "work" / "plain"
    (plain / ".claude").mkdir(parents=True)
    (plain / "src").mkdir()
    assert project_root(str(plain / "src")) == plain
    assert project_root(str(home())) == home()


async def test_trust_is_recorded_for_the_folder_not_for_home(client: TrioClient) -> None:
    (home() / ".claude" / "agents").mkdir(parents=True)
    loose = home() / "loose"
    mcp = write(loose / ".mcp.json", '{"mcpServers": {"notes": {"command": "python3"}}}')
    shown = await client.call("trust.show", cwd=str(loose))
    assert shown["folder"] == str(loose) and list(shown["files"]) == [str(mcp)]
