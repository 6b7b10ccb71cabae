/**
 * `--mcp` through the real binary: an MCP server (the SDK's McpServer, over stdio) whose tools
 * the model calls; its destructive tool waits for approval; `rx resume` starts the recorded
 * server again, says what changed in its tools, and runs the approved call.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox, serveRx } from "./helpers.js"

const fixture = join(import.meta.dirname, "..", "..", "mcp", "test", "fixtures", "server.mjs")
const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

describe("rx run --mcp", () => {
  it.scopedLive("the model calls an MCP server's tools; its destructive tool asks; resume starts the server again, says what changed, runs the approved call", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const log = join(box.root, "mcp.log")
      const variant = join(box.root, "variant")
      writeFileSync(variant, "1")
      const out = join(box.workspace, "out.txt")
      const model = yield* FakeServer.make([call("t__add", { a: 2, b: 3 }), call("t__write", { path: out, text: "from mcp" }), done("added and written")])
      const server = `t=${process.execPath} ${fixture} --log ${log} --variant-file ${variant}`
      const common = ["--db", box.db, "--workspace", box.workspace, "--sandbox", "none", "--base-url", model.baseUrl, "--model", "fake"]
      const first = yield* rx(["run", ...common, "--mcp", server, "--json", "add, then write"])
      expect(first.code, first.stderr).toBe(11)
      const events = jsonLines(first.stdout)
      const goalId = String(events[0]?.["goalId"])
      expect(events[0]).toMatchObject({ _tag: "GoalSubmitted", options: { approval: { t__write: "ask" }, settings: { mcp: [{ name: "t" }] } } })
      expect((events[0]?.["tools"] as ReadonlyArray<{ name: string }>).map((t) => t.name)).toContain("t__add")
      expect(events.find((e) => e["_tag"] === "ToolSucceeded")).toMatchObject({ tool: "t__add", output: { content: [{ type: "text", text: "5" }] } })
      expect(events.at(-1)).toMatchObject({ _tag: "Suspended", reason: "awaiting_approval" })
      expect(existsSync(out)).toBe(false)

      // The server changes its tools before the resume: said, and the goal keeps its own.
      writeFileSync(variant, "2")
      expect((yield* rx(["approve", goalId, "--db", box.db])).code).toBe(0)
      const resumed = yield* rx(["resume", goalId, "--db", box.db, "--base-url", model.baseUrl])
      expect(resumed.code, resumed.stderr).toBe(0)
      expect(resumed.stderr).toContain("MCP server t: its tools changed since the goal started")
      expect(resumed.stderr).toContain("t__extra is new (not offered to this goal)")
      expect(readFileSync(out, "utf8")).toBe("from mcp")
      expect(readFileSync(log, "utf8").trim().split("\n")).toEqual(["started", "add 2 3", "started", `write ${out}`])
      expect((yield* rx(["replay", goalId, "--db", box.db])).code).toBe(0)
    }), 60_000)

  it.scopedLive("rx serve --mcp: goals over HTTP call the MCP tools of their workspace; a destructive one waits for approval", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const log = join(box.root, "mcp.log")
      const out = join(box.workspace, "served.txt")
      const model = yield* FakeServer.make([call("t__add", { a: 20, b: 22 }), call("t__write", { path: out, text: "served" }), done("added and written")])
      const { url } = yield* serveRx(box, model.baseUrl, ["--mcp", `t=${process.execPath} ${fixture} --log ${log}`])
      const ran = yield* rx(["run", "--server", url, "--db", box.db, "--json", "add and write"])
      expect(ran.code, ran.stderr).toBe(11)
      const events = jsonLines(ran.stdout)
      const goalId = String(events[0]?.["goalId"])
      expect(events[0]).toMatchObject({ options: { approval: { t__write: "ask" }, settings: { mcp: [{ name: "t" }] } } })
      expect(events.find((e) => e["_tag"] === "ToolSucceeded")).toMatchObject({ tool: "t__add", output: { content: [{ text: "42" }] } })
      expect(events.at(-1)).toMatchObject({ _tag: "Suspended", reason: "awaiting_approval" })
      expect((yield* rx(["approve", goalId, "--server", url, "--db", box.db])).code).toBe(0)
      const followed = jsonLines((yield* rx(["events", goalId, "--follow", "--server", url, "--db", box.db])).stdout)
      expect(followed.at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      expect(readFileSync(out, "utf8")).toBe("served")
    }), 60_000)

  it.scopedLive("a bad --mcp, or a server that cannot start, is one line, exit 1, and records nothing", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const common = ["--db", box.db, "--workspace", box.workspace, "--sandbox", "none", "--model", "fake"]
      for (const [mcp, message] of [
        ["nope", "--mcp: expected NAME=COMMAND or NAME=URL"],
        ["a_b=x", "--mcp: \"a_b\": an MCP server's name"],
        ["t=/nonexistent/server", "MCP server t: cannot start"]
      ] as const) {
        const ran = yield* rx(["run", ...common, "--mcp", mcp, "goal"])
        expect(ran.code, ran.stderr).toBe(1)
        expect(ran.stderr.trim().split("\n")).toHaveLength(1)
        expect(ran.stderr).toContain(message)
        expect(existsSync(box.db)).toBe(false)
      }
    }), 60_000)
})
