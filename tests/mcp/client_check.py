"""An independent MCP client (the PyPI `mcp` SDK) for Turnstone's tests.

Run: python client_check.py COMMAND [ARGS...]
Starts COMMAND as a stdio MCP server, lists its tools, calls `word_count`
twice (on text, and on a workspace file its grant does not cover) and `bash`
(not served), then prints one JSON object:
{"tools": [...], "word_count_properties": [...], "text": {...}, "file": {...}, "bash": {...}}.
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
            try:
                bash = await session.call_tool("bash", {"command": "true"})
                bash_outcome = {"refused": bool(bash.is_error), "message": str(bash.content)}
            except Exception as e:  # a JSON-RPC error: the tool is not served
                bash_outcome = {"refused": True, "message": str(e)}
            schema = next(t.input_schema for t in listed.tools if t.name == "word_count")
            print(json.dumps({
                "tools": sorted(t.name for t in listed.tools),
                "word_count_properties": sorted(schema.get("properties", {})),
                "text": result(text),
                "file": result(file),
                "bash": bash_outcome,
            }))


if __name__ == "__main__":
    asyncio.run(main())
