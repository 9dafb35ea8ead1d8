"""Memory that recalls: the index (FTS5, BM25) of the memory files' entries, finished tasks
with their answers and compaction summaries; the "similar memories" layer a run gets for its
task; the recall tool; memory.search, memory.list and memory.forget.

Security side: a project's memory file is indexed as the prompt reads it (not through a
link out of an untrusted project); nothing that carries a credential is indexed; one
project's memory is never recalled in another.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.daemon.memory import MemoryIndex, entry_spans, fts_query, split_entries
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient

from .conftest import events_until, finished, text, trust, user_dir, write, write_script

KEY = "AKIA" + "ABCDEFGHIJKLMNOP"  # the shape of an AWS access key id


def test_a_memory_file_splits_into_its_items_and_paragraphs() -> None:
    memory = "# Memory\n\n- run the tests with uv run pytest (2026-11-01)\n- the db is in state/\n  next to the log\n\nA paragraph\nover two lines.\n## More\n1. numbered\n"
    assert split_entries(memory) == [
        "run the tests with uv run pytest (2026-11-01)",
        "the db is in state/ next to the log",
        "A paragraph over two lines.",
        "numbered",
    ]
    assert [(start, end) for _, start, end in entry_spans(memory)] == [(2, 3), (3, 5), (6, 8), (9, 10)]


def test_free_text_is_a_query_of_its_words_and_never_query_syntax() -> None:
    assert fts_query('How do I run the tests? NEAR("x" y) OR col:*') == '"run" OR "tests" OR "near" OR "col"'
    assert fts_query("the a of ?") is None


@pytest.fixture
async def index(tmp_path: Path) -> Any:
    opened = MemoryIndex.open(tmp_path / "memory.db")
    yield opened
    await opened.close()


async def test_search_ranks_by_bm25_within_the_scopes_asked(index: MemoryIndex) -> None:
    await index.add("/p", "task", "Task: fix the flaky upload test\nAnswer: the upload test waited on a real clock", "session a")
    await index.add("/p", "file", "deploys go through the staging cluster first", "/p/.roost/MEMORY.md")
    await index.add("/p", "task", "Task: rename a test helper\nAnswer: done", "session b")
    await index.add("/q", "task", "Task: the upload test of another project\nAnswer: secret plans", "session c")
    found = await index.search("why is the upload test flaky?", ["/p", "user"])
    assert [e.source for e in found] == ["session a", "session b"]
    assert found[0].score is not None and found[1].score is not None and found[0].score > found[1].score
    # Another project's memory is never recalled here; all of them when asked.
    assert "session c" in [e.source for e in await index.search("upload test", None)]
    # The same words are one entry; an entry with a credential in it is never kept.
    assert await index.add("/p", "task", "task: FIX the flaky  upload test\nanswer: the upload test waited on a real clock", "x") is None
    assert await index.add("/p", "learned", f"the deploy key is {KEY}", "session d") is None
    assert await index.count() == 4


async def test_a_memory_file_is_indexed_as_it_is_now_and_forgetting_takes_its_line_out(index: MemoryIndex, tmp_path: Path) -> None:
    path = write(tmp_path / "MEMORY.md", "- tests run with uv run pytest\n- the api key lives in the vault\n")
    await index.sync_files([("user", path, None)])
    [vault] = await index.search("where is the vault", ["user"])
    assert vault.kind == "file" and vault.source == str(path)
    path.write_text(path.read_text() + "- releases are tagged by hand\n")
    await index.sync_files([("user", path, None)])
    assert len(await index.entries(["user"])) == 3
    forgotten = await index.forget(vault.id)
    assert forgotten is not None and forgotten.text == "the api key lives in the vault"
    assert path.read_text() == "- tests run with uv run pytest\n- releases are tagged by hand\n"
    await index.sync_files([("user", path, None)])
    assert sorted(e.text for e in await index.entries(["user"])) == ["releases are tagged by hand", "tests run with uv run pytest"]
    assert not await index.search("vault", ["user"])
    # Forgotten for good: the same words written again are not indexed.
    path.write_text(path.read_text() + "- the api key lives in the vault\n")
    await index.sync_files([("user", path, None)])
    assert not await index.search("vault", ["user"])
    assert await index.forget(vault.id) is None


async def test_a_link_out_of_an_untrusted_project_is_not_indexed(index: MemoryIndex, tmp_path: Path) -> None:
    secret = write(tmp_path / "outside" / "notes.md", "- the production password is hunter2\n")
    project = tmp_path / "project"
    (project / ".roost").mkdir(parents=True)
    os.symlink(secret, project / ".roost" / "MEMORY.md")
    await index.sync_files([(str(project), project / ".roost" / "MEMORY.md", project)])
    assert not await index.search("production password", None)


# -- through the daemon ---------------------------------------------------------------------------


async def _run(client: TrioClient, project: Path, task: str, *replies: list[dict[str, Any]], **kw: Any) -> list[dict[str, Any]]:
    model = write_script(project, *replies, name=f"{abs(hash(task))}.json")
    run = await client.call("dispatch", task=task, cwd=str(project), model=model, attach=True, **kw)
    return await events_until(client, finished(run["run"]))


async def _entries(client: TrioClient, project: Path, **kw: Any) -> list[dict[str, Any]]:
    for _ in range(100):  # indexed off the run's way: a moment after it ends
        entries = (await client.call("memory.list", cwd=str(project), **kw))["entries"]
        if entries:
            return entries
        await trio.sleep(0.05)
    return []


async def test_a_finished_task_is_recalled_for_a_like_task(client: TrioClient, project: Path) -> None:
    await _run(client, project, "why does the upload test fail on CI?", [text("The upload test waited on the wall clock; it now uses a fake clock.")])
    [entry] = await _entries(client, project)
    assert entry["kind"] == "task" and entry["source"].startswith("session ")
    assert entry["text"] == "Task: why does the upload test fail on CI?\nAnswer: The upload test waited on the wall clock; it now uses a fake clock."

    shown = await client.call("prompt", cwd=str(project), task="the upload test is flaky again")
    [layer] = [x for x in shown["layers"] if x["name"] == "similar memories"]
    assert "it now uses a fake clock" in layer["text"] and layer["source"] == entry["source"]
    # Nothing alike, no layer.
    shown = await client.call("prompt", cwd=str(project), task="write a haiku")
    assert "similar memories" not in [x["name"] for x in shown["layers"]]

    # The next run gets it in its system prompt; an agent with memory: off does not.
    events = await _run(client, project, "fix the flaky upload test", [text("ok")])
    started = next(e for e in events if e["type"] == "run.started")
    assert "similar memories" in [layer["name"] for layer in started["prompt"]]
    write(project / ".roost" / "agents" / "quiet.md", "---\nname: quiet\nmemory: off\n---\nBe quiet.\n")
    events = await _run(client, project, "the upload test once more", [text("ok")], agent="quiet")
    started = next(e for e in events if e["type"] == "run.started")
    assert "similar memories" not in [layer["name"] for layer in started["prompt"]]


async def test_the_model_recalls_with_its_own_words(client: TrioClient, project: Path) -> None:
    write(project / ".roost" / "MEMORY.md", "- deploys go through the staging cluster first\n- tests: uv run pytest -q\n")
    call = {"type": "tool_use", "name": "recall", "input": {"query": "how do deploys work"}}
    events = await _run(client, project, "deploy it", [call], [text("done")])
    result = next(e for e in events if e["type"] == "tool.finished")
    assert not result["is_error"] and "deploys go through the staging cluster first" in result["result"]
    assert "uv run pytest" not in result["result"]
    # recall only reads: agent mode runs it without asking.
    assert not [e for e in events if e["type"] == "permission.requested"]


async def test_search_list_and_forget_through_the_api(client: TrioClient, project: Path, tmp_path: Path) -> None:
    write(user_dir() / "MEMORY.md", "- I prefer small commits\n")
    other = tmp_path / "other"
    write(other / ".roost" / "MEMORY.md", "- the other project deploys on fridays\n")
    found = (await client.call("memory.search", query="commits", cwd=str(project)))["entries"]
    assert [e["text"] for e in found] == ["I prefer small commits"]
    assert not (await client.call("memory.search", query="fridays", cwd=str(project)))["entries"]
    assert (await client.call("memory.search", query="fridays", cwd=str(other)))["entries"]
    assert (await client.call("memory.search", query="fridays", all=True))["entries"]

    gone = (await client.call("memory.forget", id=found[0]["id"]))["forgotten"]
    assert gone["text"] == "I prefer small commits"
    assert (user_dir() / "MEMORY.md").read_text() == ""
    with pytest.raises(RpcError) as caught:
        await client.call("memory.forget", id=found[0]["id"])
    assert caught.value.code == ErrorCode.INVALID_PARAMS


async def test_memory_through_the_cli(client: TrioClient, project: Path) -> None:
    from click.testing import CliRunner

    from roost.cli._main import cli

    write(user_dir() / "MEMORY.md", "- the changelog is written by hand\n")
    runner = CliRunner()
    socket = os.environ["ROOST_SOCKET"]

    def roost(*args: str) -> Any:
        return runner.invoke(cli, ["--socket", socket, *args], catch_exceptions=False)

    listed = await trio.to_thread.run_sync(roost, "memory", "search", "changelog", "--cwd", str(project), "--json")
    [entry] = json.loads(listed.output)
    shown = await trio.to_thread.run_sync(roost, "memory", "list", "--cwd", str(project))
    assert f"[{entry['id']}] file · {user_dir() / 'MEMORY.md'}" in shown.output
    assert "    the changelog is written by hand" in shown.output
    gone = await trio.to_thread.run_sync(roost, "memory", "forget", str(entry["id"]))
    assert gone.output == f"forgot {entry['id']}: the changelog is written by hand\n"


async def test_a_memory_file_too_long_to_show_whole_is_recalled_by_entry(client: TrioClient, project: Path) -> None:
    filler = "".join(f"- note {n}: nothing of interest here\n" for n in range(1200))
    write(project / ".roost" / "MEMORY.md", filler + "- the billing service needs the EU region flag\n")
    shown = await client.call("prompt", cwd=str(project), task="deploy the billing service")
    layers = {x["name"]: x for x in shown["layers"]}
    assert "EU region flag" not in layers["memory"]["text"]  # cut: past what the memory layer shows
    assert "the billing service needs the EU region flag" in layers["similar memories"]["text"]


# -- learned memory -------------------------------------------------------------------------------


def _learning_script(folder: Path, reply: str, facts: Any, name: str) -> str:
    path = folder / name
    learned = [{"content": [{"type": "text", "text": facts if isinstance(facts, str) else json.dumps(facts)}]}]
    path.write_text(json.dumps({"responses": [{"content": [text(reply)]}], "learned": learned}))
    return f"scripted/{path}"


LEARNER = "---\nname: learner\nmemory: learn\n---\nYou learn.\n"


async def test_a_run_that_learns_keeps_its_durable_facts(client: TrioClient, project: Path) -> None:
    write(project / ".roost" / "agents" / "learner.md", LEARNER)
    facts = [
        {"fact": "The tests run with `uv run pytest -q`.", "scope": "project"},
        {"fact": "The user wants answers in French.", "scope": "user"},
        {"fact": f"The deploy key is {KEY}.", "scope": "project"},
    ]
    model = _learning_script(project, "Ran them: all pass.", facts, "learn.json")
    run = await client.call("dispatch", task="run the tests", cwd=str(project), model=model, agent="learner", attach=True)
    await events_until(client, finished(run["run"]))
    [said] = await events_until(client, lambda e: e["type"] == "memory.learned")
    # The project is not trusted: nothing goes to the memory every project reads; the key
    # never goes anywhere.
    assert said["run"] == run["run"] and [e["text"] for e in said["entries"]] == ["The tests run with `uv run pytest -q`."]
    learned = [e for e in await _entries(client, project) if e["kind"] == "learned"]
    assert [(e["text"], e["source"], e["scope"]) for e in learned] == [
        ("The tests run with `uv run pytest -q`.", f"session {run['session']} run {run['run']}", str(project))
    ]
    # Recalled for a like task; forgotten for good.
    found = (await client.call("memory.search", query="how do I run the tests", cwd=str(project)))["entries"]
    assert found[0]["kind"] == "learned"
    await client.call("memory.forget", id=found[0]["id"])
    assert not [e for e in (await client.call("memory.list", cwd=str(project)))["entries"] if e["kind"] == "learned"]


async def test_a_trusted_folders_run_learns_into_the_users_memory(client: TrioClient, project: Path) -> None:
    write(project / ".roost" / "agents" / "learner.md", LEARNER)
    await trust(client, project)
    model = _learning_script(project, "Bonjour.", [{"fact": "The user wants answers in French.", "scope": "user"}], "fr.json")
    run = await client.call("dispatch", task="say hello", cwd=str(project), model=model, agent="learner", attach=True)
    said = (await events_until(client, lambda e: e["type"] == "memory.learned"))[-1]
    assert said["entries"][0]["scope"] == "user"
    [entry] = [e for e in (await client.call("memory.list", all=True))["entries"] if e["kind"] == "learned"]
    assert entry["scope"] == "user" and entry["source"] == f"session {run['session']} run {run['run']}"


async def test_the_users_config_makes_every_run_learn_but_an_agents_memory_off(client: TrioClient, project: Path) -> None:
    write(user_dir() / "config.toml", "[memory]\nlearn = true\n")
    model = _learning_script(project, "Done.", [{"fact": "Releases are cut on Mondays.", "scope": "project"}], "cut.json")
    run = await client.call("dispatch", task="cut a release", cwd=str(project), model=model, attach=True)
    await events_until(client, lambda e: e["type"] == "memory.learned")
    write(project / ".roost" / "agents" / "quiet.md", "---\nname: quiet\nmemory: off\n---\nBe quiet.\n")
    # An answer that is no array teaches nothing, and costs the run nothing.
    model = _learning_script(project, "Done again.", "Nothing, sorry.", "off.json")
    for agent in ("quiet", "default"):
        run = await client.call("dispatch", task=f"cut another release ({agent})", cwd=str(project), model=model, agent=agent, attach=True)
        done = (await events_until(client, finished(run["run"])))[-1]
        assert done["reason"] == "done"
    await trio.sleep(0.5)
    learned = [e["text"] for e in (await client.call("memory.list", cwd=str(project)))["entries"] if e["kind"] == "learned"]
    assert learned == ["Releases are cut on Mondays."]


async def test_learning_against_the_messages_api(client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.anthropic_server import serve_anthropic

    write(project / ".roost" / "agents" / "learner.md", LEARNER)
    facts = json.dumps([{"fact": "Migrations run with make migrate.", "scope": "project"}])
    script = [
        {"content": [{"type": "text", "text": "Migrated."}], "stop_reason": "end_turn"},
        {"content": [{"type": "text", "text": f"Here they are:\n{facts}"}], "stop_reason": "end_turn"},
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-sentinel")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call("dispatch", task="run the migrations", cwd=str(project), model="anthropic/claude-test",
                                agent="learner", attach=True)
        said = (await events_until(client, lambda e: e["type"] == "memory.learned"))[-1]
        learn = server.requests[1].body
    assert said["entries"][0]["text"] == "Migrations run with make migrate."
    # One call of the run's model, over the run's record: its task and its answer.
    assert learn["model"] == "claude-test" and "durable facts" in learn["system"][0]["text"]
    record = learn["messages"][0]["content"][0]["text"]
    assert "task: run the migrations" in record and "agent: Migrated." in record
    assert "tools" not in learn


async def test_the_recalled_memories_come_after_the_part_a_provider_caches(client: TrioClient, project: Path, anthropic: Any) -> None:
    await _run(client, project, "why does the upload test fail on CI?", [text("It waited on the wall clock.")])
    await _entries(client, project)
    run = await client.call("dispatch", task="the upload test is flaky", cwd=str(project), model="anthropic/claude-test", attach=True)
    await events_until(client, finished(run["run"]))
    cached, tail = anthropic.requests[-1].body["system"]
    assert "cache_control" in cached and "Similar memories" not in cached["text"]
    assert tail["text"].startswith("Similar memories") and "wall clock" in tail["text"] and "cache_control" not in tail
