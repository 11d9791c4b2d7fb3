#!/usr/bin/env python3
"""An MCP client of `git lease mcp`, on the Python MCP SDK (tests/zoo/mcp.rs drives it).

    mcp_client.py <binary> steps [<transcript>]   # steps: a JSON array on stdin, one session
    mcp_client.py <binary> race <issue> <holder>...   # one session per holder, all at once

Each session starts `<binary> mcp` in the current directory with this process's environment,
through the SDK's stdio client. `steps` runs the steps in order and prints a JSON array, one
answer per step:

    {"op": "tools"}                         -> [{"name", "inputSchema", "outputSchema",
                                                "annotations"}, ...]
    {"op": "call", "tool": T, "args": {..}} -> {"isError", "meta", "text", "json",
                                                "structured"}, or {"error": {"code",
                                                "message"}} for a JSON-RPC error answer;
                                                with "pad": {"field": F, "bytes": N}, the
                                                argument F is N bytes of "x"
    {"op": "level", "level": L}             -> {"ok": true} once logging/setLevel is
                                               answered, or {"error": {"code", "message"}}
    {"op": "event", "issue": I, "event": E} -> the data of the first logging notification
                                               that is that event of that issue (waits for it);
                                               with "ttls": N, the first whose "at" is N TTLs
                                               (its expires_at less its at) or more past its
                                               acquired_at
    {"op": "git", "args": [..]}             -> {"code", "stdout", "stderr"} of plain git run
                                               in the current directory, mid-session
    {"op": "lease", "args": [..]}           -> the same, of `<binary> args` (another process)
    {"op": "kill", "signal": N}             -> {"pid"}: sends signal N to the server and waits
                                               until it is gone (the last step of a session)

A session that the plan did not end with `kill` is made quiet before it closes (logging/setLevel
to `error`): the SDK kills its server (SIGKILL) when a notification arrives after the session
closed, and the server would then have no chance to release its session's leases.

With a transcript file, `steps` starts the server as `<binary> mcp | tee <transcript>`, so
that the test can read every byte the server wrote on its stdout, as the SDK received it.

`race` initializes every session first, then has them all call `acquire` of the issue at
once (with a session, detached so that the winner's lease outlives the sessions; given a JSON
object on stdin, with those arguments and each one's holder instead), and prints their answers in the holders' order. Everything any session received (each
result's text, each notification) is also printed, as `"seen"`, so that a test can look for
what must never appear.
"""

import json
import os
import sys
from datetime import datetime

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError

# A bound on any one wait, so that a broken server fails the test instead of hanging it.
LIMIT = 120


def instant(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def held_for(event):
    """How many TTLs past its tenure's start an event is (its TTL: expires_at less at)."""
    at = instant(event["at"])
    ttl = instant(event["expires_at"]) - at
    return (at - instant(event["acquired_at"])) / ttl


def server_pid():
    """The process id of this process's child that serves `mcp`."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and b"mcp" in argv[1:]:
            return int(entry)
    raise SystemExit("no server process found")


def gone(pid):
    """True once `pid` has exited (a zombie, or reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


class Client:
    def __init__(self, transcript=None, binary=None):
        self.binary = binary
        self.events = []
        self.seen = []
        self.arrived = anyio.Event()
        self.transcript = transcript

    async def on_log(self, params):
        self.events.append(params.data)
        self.seen.append(json.dumps(params.data))
        self.arrived.set()

    def server(self, binary):
        if self.transcript:
            command = "/bin/sh"
            args = ["-c", '"$0" mcp | tee -- "$1"', binary, self.transcript]
        else:
            command, args = binary, ["mcp"]
        return StdioServerParameters(
            command=command, args=args, env=dict(os.environ), cwd=os.getcwd()
        )

    async def call(self, session, tool, args):
        try:
            result = await session.call_tool(tool, args)
        except McpError as e:
            return {"error": {"code": e.error.code, "message": e.error.message}}
        text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
        self.seen.append(text)
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        return {
            "isError": bool(result.isError),
            "meta": result.meta,
            "text": text,
            "json": parsed,
            "structured": result.structuredContent,
        }

    async def event(self, issue, event, ttls=None):
        while True:
            for data in self.events:
                if isinstance(data, dict) and data.get("issue") == issue and data.get("event") == event:
                    if ttls is None or held_for(data) >= ttls:
                        return data
            self.arrived = anyio.Event()
            await self.arrived.wait()

    async def step(self, session, step):
        op = step["op"]
        if op == "tools":
            listed = await session.list_tools()
            return [
                {
                    "name": t.name,
                    "inputSchema": t.inputSchema,
                    "outputSchema": t.outputSchema,
                    "annotations": t.annotations.model_dump(exclude_none=True) if t.annotations else None,
                }
                for t in listed.tools
            ]
        if op == "call":
            args = dict(step.get("args", {}))
            pad = step.get("pad")
            if pad:
                args[pad["field"]] = "x" * pad["bytes"]
            with anyio.fail_after(LIMIT):
                return await self.call(session, step["tool"], args)
        if op == "level":
            try:
                await session.set_logging_level(step["level"])
            except McpError as e:
                return {"error": {"code": e.error.code, "message": e.error.message}}
            return {"ok": True}
        if op == "event":
            with anyio.fail_after(LIMIT):
                return await self.event(step["issue"], step["event"], step.get("ttls"))
        if op == "kill":
            pid = server_pid()
            os.kill(pid, step["signal"])
            with anyio.fail_after(LIMIT):
                while not gone(pid):
                    await anyio.sleep(0.01)
            return {"pid": pid}
        if op in ("git", "lease"):
            program = "git" if op == "git" else self.binary
            done = await anyio.run_process([program, *step["args"]], check=False)
            return {
                "code": done.returncode,
                "stdout": done.stdout.decode(errors="replace"),
                "stderr": done.stderr.decode(errors="replace"),
            }
        raise SystemExit(f"unknown step {op!r}")


def closed_early(group):
    """True for the SDK's own teardown error: a notification the server sent after the
    session was closed found its stream gone."""
    return all(
        isinstance(e, anyio.BrokenResourceError)
        or (isinstance(e, BaseExceptionGroup) and closed_early(e))
        for e in group.exceptions
    )


async def closing(run):
    """Runs `run`, which closes a session at its end, past the SDK's teardown error."""
    try:
        return await run()
    except BaseExceptionGroup as group:
        if not closed_early(group):
            raise


async def steps(binary, plan, transcript=None):
    client = Client(transcript, binary)
    answers = []

    async def run():
        async with stdio_client(client.server(binary)) as (read, write):
            async with ClientSession(read, write, logging_callback=client.on_log) as session:
                with anyio.fail_after(LIMIT):
                    await session.initialize()
                for step in plan:
                    answers.append(await client.step(session, step))
                if not plan or plan[-1]["op"] != "kill":
                    with anyio.fail_after(LIMIT):
                        await session.set_logging_level("error")

    await closing(run)
    if len(answers) != len(plan):
        raise SystemExit(f"only {len(answers)} of {len(plan)} steps answered")
    return {"answers": answers, "seen": client.seen}


async def race(binary, issue, holders, args):
    ready = [anyio.Event() for _ in holders]
    go = anyio.Event()
    answers = [None] * len(holders)
    clients = [Client() for _ in holders]

    async def one(i, holder):
        client = clients[i]

        async def run():
            async with stdio_client(client.server(binary)) as (read, write):
                async with ClientSession(read, write, logging_callback=client.on_log) as session:
                    await session.initialize()
                    ready[i].set()
                    await go.wait()
                    claim = dict(args) if args else {"issues": [issue], "session": True, "detached": True}
                    claim["holder"] = holder
                    answers[i] = await client.call(session, "acquire", claim)

        await closing(run)

    async def start():
        for r in ready:
            await r.wait()
        go.set()

    async def run():
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as group:
                for i, holder in enumerate(holders):
                    group.start_soon(one, i, holder)
                group.start_soon(start)

    await run()
    if any(a is None for a in answers):
        raise SystemExit(f"not every client answered: {answers}")
    return {"answers": answers, "seen": [s for c in clients for s in c.seen]}


def main():
    binary, mode = sys.argv[1], sys.argv[2]
    if mode == "steps":
        transcript = sys.argv[3] if len(sys.argv) > 3 else None
        out = anyio.run(steps, binary, json.load(sys.stdin), transcript)
    elif mode == "race":
        args = json.load(sys.stdin)
        out = anyio.run(race, binary, sys.argv[3], sys.argv[4:], args if isinstance(args, dict) else None)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
