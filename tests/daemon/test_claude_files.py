"""Claude Code's files where Claude Code keeps them: agents (lenient front matter,
~/.claude, subfolders, its tool names and model tiers), skills, CLAUDE.md with imports and
the project root."""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

import pytest
import yaml

from roost.daemon.folder._agents import agents_from, load_agents
from roost.daemon.folder._project import find_skills, project_root
from roost.daemon.folder._prompt import IMPORT_DEPTH, SKILLS_LIMIT, imports
from roost.daemon.folder._reading import FolderFiles
from roost.daemon.folder._setup import load_folder
from roost.daemon.folder._trust import NO_TRUST
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient

from .conftest import events_until, finished, text, trust, user_dir, write, write_script

FIXTURES = Path(__file__).parent / "claude_files"


def home() -> Path:
    return Path(os.environ["HOME"])


def agent(name: str, *front: str, body: str = "Do it.") -> str:
    return "\n".join(["---", f"name: {name}", *front, "---", body, ""])


def skills(folder: Path, count: int) -> None:
    """``count`` skills with long descriptions of two lines."""
    for n in range(count):
        first = f"Skill number {n} does a thing: it is described at length. " * 8
        front = f"name: skill-{n:03}\ndescription: |\n  {first}\n  Second line."
        write(folder / f"skill-{n:03}" / "SKILL.md", f"---\n{front}\n---\nBody {n}.\n")


def test_the_agents_claude_code_loads_load(project: Path) -> None:
    shutil.copytree(FIXTURES / "agents", project / ".claude" / "agents")
    lenient = ["code-reviewer.md", "silent-failure-hunter.md", "test-planner.md", "test-runner.md", "team/db-admin.md"]
    for name in lenient:
        front = (FIXTURES / "agents" / name).read_text().split("---")[1]
        with pytest.raises(yaml.YAMLError):
            yaml.safe_load(front)
    found = load_agents(str(project))
    assert found.problems == ()
    agents = found.agents
    assert set(agents) == {
        "default", "code-reviewer", "code-explorer", "silent-failure-hunter", "test-planner", "test-runner", "db-admin",
    }
    reviewer = agents["code-reviewer"]
    assert reviewer.description.startswith("Use this agent when you need to review code for adherence")
    # The \n of a one-line description are line ends, as Claude Code reads them.
    assert "Examples: <example>\nContext: The user has just implemented" in reviewer.description
    assert reviewer.model == "opus" and reviewer.tools is None
    assert reviewer.instructions.startswith("You are an expert code reviewer.")
    assert agents["silent-failure-hunter"].model is None  # inherit
    explorer = agents["code-explorer"]
    assert explorer.tools == (
        "glob", "grep", "read", "notebook_read", "web_fetch", "todo", "web_search", "kill_shell", "bash_output",
    )
    assert explorer.model == "sonnet"
    planner = agents["test-planner"]
    assert planner.description.startswith("Use this agent when: the user asks for a test plan")
    assert planner.tools == ("read", "grep", "bash", "task")
    runner = agents["test-runner"]
    assert runner.tools == ("bash", "read", "todo") and runner.max_turns == 8
    admin = agents["db-admin"]
    assert admin.source == str(project / ".claude" / "agents" / "team" / "db-admin.md")
    assert admin.tools == ("read", "bash", "postgres__query", "github__*") and admin.model == "haiku"
    assert admin.description == "Database administrator for the team. Use for: migrations, slow queries, query plans"


def test_a_byte_order_mark_or_windows_line_ends_refuse_no_file(project: Path) -> None:
    explorer = (FIXTURES / "agents" / "code-explorer.md").read_text()
    planner = (FIXTURES / "agents" / "test-planner.md").read_text()
    agents = project / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "explorer.md").write_bytes(b"\xef\xbb\xbf" + explorer.encode())
    (agents / "planner.md").write_bytes(b"\xef\xbb\xbf" + planner.replace("\n", "\r\n").encode())
    skill = project / ".claude" / "skills" / "pdf-tools" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "skills" / "pdf-tools" / "SKILL.md").read_bytes())
    found = load_agents(str(project))
    assert found.problems == ()
    assert found.agents["code-explorer"].model == "sonnet"
    planner = found.agents["test-planner"]
    assert planner.description.startswith("Use this agent when: the user asks") and "\r" not in planner.description
    assert planner.instructions.startswith("You plan tests.") and "\r" not in planner.instructions
    [(name, (description, *_))] = find_skills(str(project)).items()
    assert name == "pdf-tools" and description.startswith("Extract text and tables from PDF files,")
    assert "Use when: the user mentions PDFs" in description


@pytest.mark.parametrize(
    ("front", "line", "problem"),
    [
        ("description: Use it when: asked\ntools: [Read, Grep", 3, "does not close"),
        ("description: fine\n: :", 3, "bad YAML"),
        ("description: Use it when: asked\nthis line is no field", 3, "not a key: value line"),
    ],
)
def test_front_matter_neither_reading_accepts_is_reported_with_its_line(
    project: Path, front: str, line: int, problem: str
) -> None:
    bad = write(project / ".claude" / "agents" / "bad.md", f"---\n{front}\n---\nbody\n")
    [reported] = load_agents(str(project)).problems
    assert reported.startswith(f"{bad}:{line}: bad YAML") and problem in reported, reported


def test_the_users_claude_agents_need_no_trust_and_yield_to_roosts(project: Path) -> None:
    claude = home() / ".claude" / "agents"
    write(claude / "helper.md", agent("helper", "mode: full", body="From ~/.claude."))
    write(claude / "solo.md", agent("solo", "mode: exec", "permissions: {allow: ['bash(*)']}"))
    write(claude / "mine" / "nested.md", agent("nested", "model: haiku"))
    found = load_agents(str(project))
    assert found.widening == () and found.problems == ()
    assert found.agents["helper"].mode == "full" and not found.agents["helper"].from_project
    assert found.agents["solo"].mode == "exec" and found.agents["nested"].model == "haiku"

    # Lowest first: built-in, ~/.claude/agents, ~/.config/roost/agents, .claude/agents, .roost/agents.
    layers = [
        user_dir() / "agents",
        project / ".claude" / "agents",
        project / ".roost" / "agents",
    ]
    for n, folder in enumerate(layers):
        write(folder / "helper.md", agent("helper", body=f"layer {n}"))
        assert load_agents(str(project)).agents["helper"].instructions == f"layer {n}"
    assert load_agents(str(project)).agents["helper"].from_project


def test_at_home_the_users_claude_folder_stays_the_users() -> None:
    # A dotfiles repository makes $HOME a project; ~/.claude is still the user's own.
    (home() / ".git").mkdir()
    write(home() / ".claude" / "agents" / "fixer.md", agent("fixer", "mode: full"))
    write(home() / ".claude" / "skills" / "notes" / "SKILL.md", "---\ndescription: Take notes.\n---\nx\n")
    found = load_agents(str(home()))
    assert found.widening == () and found.agents["fixer"].mode == "full"
    assert found.agents["fixer"].source == str(home() / ".claude" / "agents" / "fixer.md")
    assert find_skills(str(home()))["notes"].own


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


def test_one_reading_sees_one_project_and_the_next_reading_the_new_one(tmp_path: Path) -> None:
    work = tmp_path / "work" / "src"
    work.mkdir(parents=True)
    files = FolderFiles(str(work), {})
    # Made meanwhile: what is read together still sees one project.
    (tmp_path / "work" / ".git").mkdir()
    write(tmp_path / "work" / ".claude" / "agents" / "helper.md", agent("helper"))
    assert files.place.root == work and "helper" not in agents_from(files).agents
    # The next reading sees the repository.
    assert "helper" in load_agents(str(work)).agents


async def test_trust_is_recorded_for_the_folder_not_for_home(client: TrioClient) -> None:
    (home() / ".claude" / "agents").mkdir(parents=True)
    loose = home() / "loose"
    mcp = write(loose / ".mcp.json", '{"mcpServers": {"notes": {"command": "python3"}}}')
    shown = await client.call("trust.show", cwd=str(loose))
    assert shown["folder"] == str(loose) and list(shown["files"]) == [str(mcp)]


def test_a_folders_reading_leaves_no_cycle_to_collect(tmp_path: Path) -> None:
    # Most files a reading looks for are absent: each absence must not keep the reading
    # (and every part it made) alive until the cycle collector comes.
    work = tmp_path / "work"
    write(work / ".claude" / "agents" / "helper.md", agent("helper"))
    load_folder(str(work), {}, NO_TRUST)  # the imports' own garbage, once
    gc.collect()
    gc.disable()
    try:
        setup = load_folder(str(work), {}, NO_TRUST)
        assert "helper" in setup.agents.agents
        del setup
        assert gc.collect() == 0
    finally:
        gc.enable()
    files = FolderFiles(str(work), {})
    for _ in range(2):  # asked again, the same error
        with pytest.raises(FileNotFoundError) as raised:
            files.read(work / "absent.toml")
        assert raised.value.filename == str(work / "absent.toml")


def test_imports_are_found_outside_code_only() -> None:
    found = imports(
        "Read @docs/style.md. Mail me@example.com.\n"
        "@~/notes.md and `@not/this.md` too\n"
        "```\n@inside/a/fence.md\n```\n"
        "~~~md\n@nor/this.md\n~~~\n"
        "- @docs/style.md again (once)\n"
    )
    assert found == ["docs/style.md", "~/notes.md"]


async def test_instruction_files_claude_code_reads_with_their_imports(client: TrioClient, project: Path) -> None:
    write(home() / ".claude" / "CLAUDE.md", "Mine: answer in English. @~/.claude/style.md")
    write(home() / ".claude" / "style.md", "Mine: short sentences.")
    write(project / "CLAUDE.md", "Root: see @docs/rules.md and @AGENTS.md\n```\n@docs/secret.md\n```\n")
    write(project / "AGENTS.md", "Root agents: run make test.")
    write(project / "CLAUDE.local.md", "Local: my sandbox URL is http://localhost:8000")
    write(project / ".claude" / "CLAUDE.md", "Dot-claude: the project's memory where Claude Code also keeps it.")
    write(project / "docs" / "rules.md", "Rules: no globals. @more/deeper.md")
    write(project / "docs" / "secret.md", "FENCED")
    write(project / "docs" / "more" / "deeper.md", "Deeper: back to @../rules.md (a cycle)")
    prompt = await client.call("prompt", cwd=str(project))
    layer = next(x for x in prompt["layers"] if x["name"] == "instructions")
    body = layer["text"]
    order = ["Mine: answer", "Mine: short", "Root agents:", "Root: see", "Rules: no globals", "Deeper:", "Dot-claude:", "Local: my"]
    assert [body.index(part) for part in order] == sorted(body.index(part) for part in order), body
    assert body.count("Rules: no globals") == 1 and body.count("Root agents:") == 1 and "FENCED" not in body
    assert f"Instructions from {project / 'docs' / 'rules.md'} (imported by {project / 'CLAUDE.md'})" in body
    assert f"{project / 'docs' / 'more' / 'deeper.md'} (imported)" in layer["source"]
    assert str(project / "CLAUDE.local.md") in layer["source"]


async def test_imports_stop_at_the_depth_limit(client: TrioClient, project: Path) -> None:
    write(project / "CLAUDE.md", "Level 0 @l1.md")
    for n in range(1, IMPORT_DEPTH + 2):
        write(project / f"l{n}.md", f"Level {n} @l{n + 1}.md")
    prompt = await client.call("prompt", cwd=str(project))
    body = next(x for x in prompt["layers"] if x["name"] == "instructions")["text"]
    assert f"Level {IMPORT_DEPTH} " in body and f"Level {IMPORT_DEPTH + 1} " not in body


async def test_a_project_imports_nothing_from_outside_it_trusted_or_not(client: TrioClient, project: Path) -> None:
    secret = write(project.parent / "outside" / "notes.md", "OUTSIDE NOTES")
    key = write(home() / ".aws" / "credentials", "AWS SECRET KEY")
    write(project / "CLAUDE.md", "Read @../outside/notes.md first.")
    for trusted in (False, True):
        prompt = await client.call("prompt", cwd=str(project))
        layer = next(x for x in prompt["layers"] if x["name"] == "instructions")
        assert "OUTSIDE NOTES" not in prompt["text"]
        assert f"{project / '..' / 'outside' / 'notes.md'} (not read: it leads outside the project)" in layer["source"]
        if not trusted:
            await trust(client, project)
    # A trusted folder's file that later imports a credential, or becomes a link to one.
    write(project / "CLAUDE.md", "Read @~/.aws/credentials first.")
    (project / "AGENTS.md").symlink_to(key)
    prompt = await client.call("prompt", cwd=str(project))
    assert "AWS SECRET KEY" not in prompt["text"] and secret.exists()
    # The user's own CLAUDE.md may import the user's files.
    write(home() / ".claude" / "CLAUDE.md", "Mine: @../notes.md")
    write(home() / "notes.md", "MY NOTES")
    assert "MY NOTES" in (await client.call("prompt", cwd=str(project)))["text"]


async def test_the_skills_list_is_bounded_and_goes_only_to_runs_with_the_skill_tool(
    client: TrioClient, project: Path
) -> None:
    skills(home() / ".claude" / "skills", 181)
    shutil.copytree(FIXTURES / "skills", project / ".claude" / "skills")
    full = await client.call("prompt", cwd=str(project))
    layer = next(x for x in full["layers"] if x["name"] == "skills")
    assert layer["chars"] <= SKILLS_LIMIT + 200
    lines = layer["text"].splitlines()
    # The project's first; one line each, cut; then how many more there are.
    assert lines[1].startswith("- pdf-tools: Extract text and tables from PDF files")
    assert lines[2].startswith("- skill-000: Skill number 0") and lines[2].endswith("…") and "Second line" not in layer["text"]
    more = 181 + 1 - (len(lines) - 2)
    assert lines[-1].startswith(f"- ... and {more} more skills")
    assert str(home() / ".claude" / "skills") in layer["source"]

    write(project / ".roost" / "agents" / "reader.md", agent("reader", "tools: [read, grep]"))
    write(project / ".roost" / "agents" / "skilled.md", agent("skilled", "tools: Read, Skill"))
    for name, mode, has in (("reader", "agent", False), ("skilled", "agent", True), ("default", "plan", False)):
        prompt = await client.call("prompt", cwd=str(project), agent=name, mode=mode)
        assert ("skills" in [x["name"] for x in prompt["layers"]]) == has, (name, mode)

    model = write_script(project, [{"type": "tool_use", "name": "skill", "input": {"name": "skill-180"}}], [text("ok")])
    for name, has in (("reader", False), ("skilled", True)):
        run = await client.call("dispatch", task="t", agent=name, model=model, cwd=str(project), attach=True)
        events = await events_until(client, finished(run["run"]))
        started = next(e for e in events if e["type"] == "run.started")
        assert ("skills" in [x["name"] for x in started["prompt"]]) == has
    # A skill left off the list is still there to read.
    [result] = [e for e in events if e["type"] == "tool.finished"]
    assert "Body 180." in result["result"] and not result["is_error"]


async def test_claude_tiers_run_on_the_model_the_user_maps_them_to(client: TrioClient, project: Path) -> None:
    write(project / ".claude" / "agents" / "explorer.md", (FIXTURES / "agents" / "code-explorer.md").read_text())
    listed = await client.call("agents.list", cwd=str(project))
    explorer = next(a for a in listed["agents"] if a["name"] == "code-explorer")
    assert (explorer["model"], explorer["model_id"]) == ("sonnet", "anthropic/claude-sonnet-4-6")
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="t", agent="code-explorer", cwd=str(project))
    assert info.value.code == ErrorCode.MODEL_UNAVAILABLE and "ANTHROPIC_API_KEY" in info.value.message

    # A project's [models] is someone else's word: untrusted, it maps nothing.
    model = write_script(project, [text("Explored.")])
    write(project / ".roost" / "config.toml", f'[models]\nsonnet = "{model}"\n')
    listed = await client.call("agents.list", cwd=str(project))
    assert next(a for a in listed["agents"] if a["name"] == "code-explorer")["model_id"] == "anthropic/claude-sonnet-4-6"
    (project / ".roost" / "config.toml").unlink()

    write(user_dir() / "config.toml", f'[models]\nsonnet = "{model}"\n')
    run = await client.call("dispatch", task="explore", agent="code-explorer", cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    started = next(e for e in events if e["type"] == "run.started")
    assert started["model"] == model and events[-1]["reason"] == "done" and events[-1]["text"] == "Explored."


async def test_agents_list_names_the_tools_roost_does_not_have(client: TrioClient, project: Path) -> None:
    shutil.copytree(FIXTURES / "agents", project / ".claude" / "agents")
    write(user_dir() / "config.toml", '[mcp.servers.postgres]\ncommand = "python3"\nargs = ["-c", "pass"]\n')
    write(project / ".roost" / "agents" / "lead.md", agent("lead", "tools: [read, code-reviewer, 'post*', '*', 'nope__*']"))
    listed = await client.call("agents.list", cwd=str(project))
    unknown = {a["name"]: a["unknown_tools"] for a in listed["agents"]}
    # web_fetch and todo are roost's names for WebFetch and TodoWrite: whether this daemon
    # has them is not this test's business. Task is the sub-agent tool every run may get;
    # web_search (WebSearch) too, where its model and mode allow (a dispatch says).
    mapped = {"web_fetch", "todo"}
    assert [t for t in unknown["code-explorer"] if t not in mapped] == []
    assert unknown["db-admin"] == ["github__*"]
    assert unknown["lead"] == ["nope__*"]
    assert unknown["code-reviewer"] == [] and unknown["default"] == []
    assert [t for t in unknown["test-runner"] if t not in mapped] == []
    assert unknown["test-planner"] == []  # tools: [Read, Grep, Bash, Task]


async def test_the_users_skills_are_listed_beside_a_project_with_many(client: TrioClient, project: Path) -> None:
    # 181 project skills and 17 of the user's: the cut list names the user's too.
    skills(project / ".claude" / "skills", 181)
    for n in range(17):
        write(home() / ".claude" / "skills" / f"mine-{n:02}" / "SKILL.md", f"---\nname: mine-{n:02}\ndescription: Mine {n}.\n---\nbody\n")
    layer = next(x for x in (await client.call("prompt", cwd=str(project)))["layers"] if x["name"] == "skills")
    assert all(f"- mine-{n:02}: Mine {n}." in layer["text"] for n in range(17))
    assert "- skill-000:" in layer["text"] and " more skills" in layer["text"]
