"""Commands about models: providers, chat."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ._connect import daemon, env_param, target, workdir
from ._follow import print_json
from ._run import think_value
from ._safe_text import printable


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_obj
def providers(obj: dict[str, Any], as_json: bool) -> None:
    """List the configured model providers and whether each is usable (no network).

    Providers come from built-ins (anthropic, openai, scripted), the user's config.toml and
    the project's .roost/config.toml (a trusted one). Keys are read from this terminal's
    environment.
    """
    with daemon(obj) as client:
        listing = client.call("providers.list", cwd=workdir(target(obj), client), **env_param(target(obj)))
    if as_json:
        click.echo(json.dumps(listing))
        return
    # Providers and models come from config files, a project's too: printable only.
    click.echo(printable(f"default model: {listing['default_model']}"))
    click.echo(f"{'NAME':<12} {'KIND':<10} {'USABLE':<7} {'KEY':<20} BASE URL")
    for p in listing["providers"]:
        usable = "yes" if p["usable"] else "no"
        key = p["api_key_env"] or "-"
        line = f"{p['name']:<12} {p['kind']:<10} {usable:<7} {key:<20} {p['base_url'] or '-'}"
        click.echo(printable(line + (f"  ({p['problem']})" if p["problem"] else "")))
    for path in listing["files"]:
        click.echo(printable(f"config: {path}"))


@click.command()
@click.argument("message", required=False)
@click.option("--messages", "messages_file", type=click.File("r"), help="A JSON list of {role, content} messages ('-': stdin).")
@click.option("--model", "-m", envvar="ROOST_MODEL", help="provider/model, a Claude model name or alias (sonnet, ...).  [env: ROOST_MODEL]")
@click.option("--system", help="System prompt.")
@click.option("--tools", "tools_file", type=click.File("r"), help="A JSON list of {name, description, input_schema} offered to the model.")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Reply length limit.")
@click.option("--think", callback=lambda ctx, param, value: think_value(value), help="Thinking: off, low, medium, high, or a budget in tokens.")
@click.option("--json", "as_json", is_flag=True, help="Print delta events and the reply as JSON lines.")
@click.pass_obj
def chat(
    obj: dict[str, Any],
    message: str | None,
    messages_file: Any,
    model: str | None,
    system: str | None,
    tools_file: Any,
    max_tokens: int | None,
    think: int | str | None,
    as_json: bool,
) -> None:
    """One model turn on MESSAGE (or a message list), streamed; no tools run, nothing stored.

    \b
    Examples:
      roost chat "say hello" --model scripted/demo
      echo '[{"role": "user", "content": "hi"}]' | roost chat --messages - --json
    """
    if (message is None) == (messages_file is None):
        raise click.UsageError("give either MESSAGE or --messages")
    messages = [{"role": "user", "content": message}] if message is not None else _json(messages_file, "--messages")
    params: dict[str, Any] = {"messages": messages}
    for key, value in (("model", model), ("system", system), ("max_tokens", max_tokens), ("think", think)):
        if value is not None:
            params[key] = value
    if tools_file is not None:
        params["tools"] = _json(tools_file, "--tools")

    def on_note(event: dict[str, Any]) -> None:
        if as_json:
            print_json(event)
        elif event.get("type") == "text.delta":
            click.echo(printable(event.get("text", "")), nl=False)
        elif event.get("type") == "reasoning.delta":
            click.echo(click.style(printable(event.get("text", "")), dim=True), nl=False)

    with daemon(obj) as client:
        params.update(cwd=workdir(target(obj), client), **env_param(target(obj)))
        reply = client.call_streaming("chat", params, on_note)
    if as_json:
        print_json({"type": "chat.finished", **reply})
        return
    click.echo("")
    for block in reply["content"]:
        if block.get("type") == "tool_use":
            click.echo(printable(f"→ {block.get('name')} {json.dumps(block.get('input', {}))}"))
    usage = reply.get("usage") or {}
    cost = f" · ${reply['cost']:.4f}" if reply.get("cost") is not None else ""
    click.echo(
        click.style(
            printable(f"■ {reply['stop_reason']} · {reply['model']} · {usage.get('input_tokens', 0):,} in, "
                      f"{usage.get('output_tokens', 0):,} out{cost} · {reply['latency']:.1f}s"),
            dim=True,
        ),
        err=True,
    )


def _json(stream: Any, option: str) -> Any:
    try:
        return json.load(stream)
    except ValueError as exc:
        raise click.UsageError(f"{option}: not JSON ({exc})") from None
    finally:
        if stream is not sys.stdin:
            stream.close()
