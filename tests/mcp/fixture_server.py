"""A small MCP server for Turnstone's tests, written with the PyPI `mcp` package.

Run: python fixture_server.py [stdio | http PORT]

Tools:
  env_names          the names of the environment variables this process sees
  echo(text)         echoes text
  slow(seconds)      sleeps, reporting progress every 0.1 s; returns "done"
                     (a cancellation is recorded in $FIXTURE_CANCELLED)
  pids               starts a helper `sleep 300`; returns "SERVER_PID HELPER_PID"
  die                exits the process mid-call (a crashed server)
  fail(message)      a tool error (isError = true)
  add_tool(name)     registers a tool `name` and announces notifications/tools/list_changed
  read_path(path)    the file's text, or "error: <reason>"
  write_path(path, text)  "ok", or "error: <reason>"
  fetch(url)         the body of a GET (proxies from the environment), or "error: <reason>"
A marker file named by $FIXTURE_STARTS (when set) gets one line per start,
so a test can count restarts.
"""

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("turnstone-fixture")


@server.tool(description="The names of the environment variables this server process sees.")
def env_names() -> str:
    return "\n".join(sorted(os.environ))


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


@server.tool(description="Sleep for the given seconds, reporting progress.")
async def slow(seconds: float, ctx: Context) -> str:
    steps = max(1, int(seconds * 10))
    try:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}/{steps}")
            await asyncio.sleep(0.1)
    except asyncio.CancelledError:
        # The client's notifications/cancelled arrived: leave a mark for tests.
        marker = os.environ.get("FIXTURE_CANCELLED")
        if marker:
            with open(marker, "a") as f:
                f.write("cancelled\n")
        raise
    return "done"


_helpers = []


@server.tool(description="Start a helper process (sleep) and return 'SERVER_PID HELPER_PID'.")
def pids() -> str:
    import subprocess

    if not _helpers:
        _helpers.append(subprocess.Popen(["sleep", "300"]))
    return f"{os.getpid()} {_helpers[0].pid}"


@server.tool(description="Read a file; returns its text or 'error: <reason>'.")
def read_path(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return f"error: {e.strerror}"


@server.tool(description="Write text to a file; returns 'ok' or 'error: <reason>'.")
def write_path(path: str, text: str) -> str:
    try:
        with open(path, "w") as f:
            f.write(text)
        return "ok"
    except OSError as e:
        return f"error: {e.strerror}"


@server.tool(description="GET a URL (through HTTP_PROXY when set); the body or 'error: <reason>'.")
def fetch(url: str) -> str:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()
    except Exception as e:  # noqa: BLE001 - the test reads the reason
        return f"error: {e}"


@server.tool(description="Exit the server process in the middle of the call.")
def die() -> str:
    os._exit(3)


@server.tool(description="Fail with the given message.")
def fail(message: str) -> str:
    raise ToolError(message)


@server.tool(description="Register a new tool and announce the changed tool list.")
async def add_tool(name: str, ctx: Context) -> str:
    def added() -> str:
        return f"{name} says hello"

    server.add_tool(added, name=name, description=f"A tool added at run time ({name}).")
    # A session on a 2025 protocol revision hears list changes this way
    # (ctx.notify_tools_changed only reaches 2026 `subscriptions/listen` streams).
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


def main() -> None:
    marker = os.environ.get("FIXTURE_STARTS")
    if marker:
        with open(marker, "a") as f:
            f.write("start\n")
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
