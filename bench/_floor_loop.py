"""The floor: a minimal agent loop in the standard library, to measure roost against.

It makes the HTTP calls roost makes and runs the commands roost runs, with nothing else:
POST the conversation (streamed) with ``http.client`` on one kept-alive connection (over TLS
for an ``https`` URL, trusting what ``ssl.create_default_context`` does), read the
SSE body line by line, run each ``bash`` call as ``bash -c COMMAND`` (its own session,
output piped and read, as roost's tool does), append the reply and the results, repeat
until a reply calls no tool. No store, no events, no daemon.

    python bench/_floor_loop.py --kind anthropic|openai --url BASE_URL --template FILE

``FILE`` is a request body roost sent (JSON): the loop sends its model, system prompt,
tools and first messages as they are, so that both sides send the same bytes.
"""

import http.client
import json
import ssl
import subprocess
import sys
import urllib.parse


def post(conn, path, body, headers):
    conn.request("POST", path, json.dumps(body).encode(), headers)
    response = conn.getresponse()
    if response.status != 200:
        sys.exit(f"floor: {response.status} {response.read()[:200]!r}")
    return response


def events(response):
    """The ``data:`` payloads of an SSE body, read to its end."""
    for line in iter(response.readline, b""):
        if line.startswith(b"data:"):
            yield line[5:].strip()


def anthropic_turn(conn, path, body, headers):
    blocks, parts = {}, {}
    for data in events(post(conn, path, body, headers)):
        event = json.loads(data)
        kind = event["type"]
        if kind == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
            parts[event["index"]] = []
        elif kind == "content_block_delta":
            delta = event["delta"]
            parts[event["index"]].append(delta.get("text") or delta.get("partial_json") or "")
    content = []
    for i in sorted(blocks):
        block, joined = blocks[i], "".join(parts[i])
        if block["type"] == "tool_use":
            block["input"] = json.loads(joined or "{}")
        elif block["type"] == "text":
            block["text"] = joined
        content.append(block)
    calls = [(b["id"], b["input"]["command"]) for b in content if b["type"] == "tool_use"]
    results = [{"type": "tool_result", "tool_use_id": i, "content": run(c)} for i, c in calls]
    body["messages"] += [{"role": "assistant", "content": content}]
    if results:
        body["messages"].append({"role": "user", "content": results})
    return bool(results)


def openai_turn(conn, path, body, headers):
    text, calls = [], {}
    for data in events(post(conn, path, body, headers)):
        if data == b"[DONE]":
            continue  # read on to the end, so that the connection is kept
        for choice in json.loads(data)["choices"]:
            delta = choice["delta"]
            text.append(delta.get("content") or "")
            for piece in delta.get("tool_calls") or ():
                call = calls.setdefault(piece["index"], {"id": "", "name": "", "args": []})
                call["id"] = piece.get("id") or call["id"]
                call["name"] = piece.get("function", {}).get("name") or call["name"]
                call["args"].append(piece.get("function", {}).get("arguments") or "")
    message = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": "".join(c["args"])}}
            for c in calls.values()]
    body["messages"].append(message)
    for c in calls.values():
        command = json.loads("".join(c["args"]))["command"]
        body["messages"].append({"role": "tool", "tool_call_id": c["id"], "content": run(command)})
    return bool(calls)


def run(command):
    done = subprocess.run(["bash", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, start_new_session=True)
    output = done.stdout.decode("utf-8", errors="replace")
    return output + (f"\n[exit status {done.returncode}]" if done.returncode else "")


def main():
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    kind, url = args["--kind"], urllib.parse.urlsplit(args["--url"])
    with open(args["--template"]) as f:
        body = json.load(f)
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if kind == "anthropic":
        path, turn = url.path.rstrip("/") + "/v1/messages", anthropic_turn
        headers.update({"x-api-key": "bench-key", "anthropic-version": "2023-06-01"})
    else:
        path, turn = url.path.rstrip("/") + "/chat/completions", openai_turn
        headers["authorization"] = "Bearer bench-key"
    if url.scheme == "https":  # the system's trust, or SSL_CERT_FILE's
        conn = http.client.HTTPSConnection(url.hostname, url.port, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(url.hostname, url.port)
    for _ in range(int(args.get("--max-turns", "40"))):
        if not turn(conn, path, body, headers):
            break
    conn.close()


if __name__ == "__main__":
    main()
