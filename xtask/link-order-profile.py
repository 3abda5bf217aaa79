#!/usr/bin/env python3
"""Records the callgrind profiles `cargo xtask link-order` turns into the
dist link's function order (xtask/src/link_order.rs, docs/server.md).

    python3 xtask/link-order-profile.py target/dist/turnstone OUT_DIR [idle,turns]

Two runs of `turnstone serve` under callgrind, each on a scratch workspace and
SQLite file: `idle` starts, creates the administrator and sits idle for 15 s;
`turns` also runs streamed turns against a stand-in OpenAI-style model on
loopback with an SSE subscriber attached: five one after another, then a
burst of eight workstreams sending at once (group commit, two plugin
instances in flight, the others waiting for a slot). Its counters are zeroed once the server is set up, so
its profile holds only the code that serves turns.

    cargo xtask link-order OUT_DIR/callgrind.out.turns OUT_DIR/callgrind.out.idle

puts that code first, packed tightest: it is what stays resident while a
server works, since the code start-up ran is released once it is done
(docs/server.md, "Code pages released when quiet"); start-up's own code
follows.

Needs valgrind and the binary built by `cargo xtask dist` (v0 mangling).
Under valgrind the two runs take about 10 and 15 minutes on 2 cores.
"""

import http.client
import http.server
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time

BUILTINS = pathlib.Path(__file__).resolve().parent.parent / "target" / "components"
SECRET = "link-order-profile-secret-0123456789abcdef"
# Workstreams sending at once in the `turns` run.
BURST = 8


class Model(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that streams a short text reply."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        frames = []
        for word in ["Hello", " from", " the", " profile", " run."]:
            delta = {"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
            frames.append(delta)
        frames.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        frames.append({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}})
        body = "".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n"
        data = body.encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def call(port, method, path, token=None, body=None, busy_retries=0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    if resp.status == 409 and busy_retries > 0:
        # The previous turn's end frame was counted before it was sent.
        time.sleep(1)
        return call(port, method, path, token, body, busy_retries - 1)
    if resp.status != 200:
        raise SystemExit(f"{method} {path}: {resp.status} {data[:300]!r}")
    return json.loads(data) if data else None


def subscribe(port, token, ws, seen):
    """Reads the workstream's SSE stream, counting `ws_state` idle frames."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("GET", f"/v1/api/workstreams/{ws}/events", headers={"authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    for line in resp:
        if line.startswith(b"data:") and b'"ws_state"' in line and b'"idle"' in line:
            seen.append(time.monotonic())


def record(binary, out, name, turns, model_port):
    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        (scratch / "ws").mkdir()
        # Valgrind cannot reserve the pooling allocator's address space for
        # the default 1,024 slots, nor for four; with two, calls run side by
        # side and the burst's others wait their turn, as on a full node.
        (scratch / "config.toml").write_text(
            f'[auth]\njwt_secret = "{SECRET}"\n[titles]\nenabled = false\n'
            "[plugins]\nmax_concurrent_calls = 2\n"
            "[server]\nmax_connections_per_ip = 0\n"
        )
        cmd = [
            "valgrind", "--tool=callgrind", "--compress-strings=no", "--compress-pos=no",
            "--demangle=no", f"--callgrind-out-file={out / ('callgrind.out.' + name)}",
            str(binary), "--builtin-dir", str(BUILTINS), "--config", str(scratch / "config.toml"), "--workspace", str(scratch / "ws"),
            "--db", str(scratch / "t.db"), "--cache-dir", str(scratch / "cache"),
            "--base-url", f"http://127.0.0.1:{model_port}/v1", "--model", "m", "--api-key", "sk-x",
            "serve", "--host", "127.0.0.1", "--port", "0",
        ]
        env = dict(os.environ, XDG_DATA_HOME=str(scratch / "data"))
        env.pop("TURNSTONE_CONFIG", None)
        env.pop("TURNSTONE_JWT_SECRET", None)
        # Compile the components outside valgrind first: a fresh cache would
        # profile Cranelift, which a started server does not run.
        subprocess.run([str(binary), "--builtin-dir", str(BUILTINS), "--config", str(scratch / "config.toml"), "--cache-dir",
                        str(scratch / "cache"), "plugins", "list"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
        port = None
        for line in proc.stderr:
            if "serving http://" in line:
                port = int(line.split("serving http://")[1].split()[0].rsplit(":", 1)[1])
                break
        if port is None:
            raise SystemExit(f"{name}: the server did not start")
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        token = call(port, "POST", "/v1/api/auth/setup", body={
            "username": "admin", "display_name": "Admin", "password": "correct-horse"})["jwt"]
        call(port, "GET", "/health")
        call(port, "GET", "/v1/api/workstreams", token)
        if turns:
            ids = [call(port, "POST", "/v1/api/workstreams/new", token, {})["ws_id"] for _ in range(BURST)]
            seen = {ws: [] for ws in ids}
            for ws in ids:
                threading.Thread(target=subscribe, args=(port, token, ws, seen[ws]), daemon=True).start()
            time.sleep(5)
            # From here on only the code that serves turns is counted.
            subprocess.run(["callgrind_control", "--zero", str(proc.pid)], check=True, stdout=subprocess.DEVNULL)

            def turn(ws, message):
                before = len(seen[ws])
                call(port, "POST", f"/v1/api/workstreams/{ws}/send", token, {"message": message}, busy_retries=300)
                deadline = time.monotonic() + 600
                while len(seen[ws]) == before and time.monotonic() < deadline:
                    time.sleep(0.2)

            for i in range(turns):
                turn(ids[0], f"turn {i}")
            burst = [threading.Thread(target=turn, args=(ws, "burst")) for ws in ids]
            for t in burst:
                t.start()
            for t in burst:
                t.join()
            call(port, "GET", f"/v1/api/workstreams/{ids[0]}/history", token)
        time.sleep(15)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=300)
        print(f"{name}: {out / ('callgrind.out.' + name)}")


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    phases = sys.argv[3].split(",") if len(sys.argv) == 4 else ["idle", "turns"]
    binary, out = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    model = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=model.serve_forever, daemon=True).start()
    for phase in phases:
        record(binary, out, phase, {"idle": 0, "turns": 5}[phase], model.server_address[1])


if __name__ == "__main__":
    main()
