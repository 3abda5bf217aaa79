"""An independent MCP client (the PyPI `mcp` SDK) for Turnstone's tests.

Run: python client_check.py COMMAND [ARGS...]
Starts COMMAND as a stdio MCP server, lists its tools and calls `word_count`
twice (on text, and on a workspace file its grant does not cover), then prints
one JSON object: {"tools": [...], "text": {...}, "file": {...}}.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client


def result(r):
    return {
        "is_error": bool(r.is_error),
        "text": "\n".join(c.text for c in r.content if getattr(c, "type", "") == "text"),
    }


async def main() -> None:
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            text = await session.call_tool("word_count", {"text": "one two three"})
            file = await session.call_tool("word_count", {"path": "notes.txt"})
            print(json.dumps({
                "tools": sorted(t.name for t in listed.tools),
                "text": result(text),
                "file": result(file),
            }))


if __name__ == "__main__":
    asyncio.run(main())
