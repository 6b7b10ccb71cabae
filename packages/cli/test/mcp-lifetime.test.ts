/**
 * What an MCP server may run, and that nothing of it outlives rx's use of it, through the real
 * binary: a server whose program, script or npx package lies in the workspace (which the agent
 * writes) is refused in one line and never runs (a marker file says so); and every process of a
 * server, a daemon it left in its own session included, is gone once rx gives up on it: a start
 * timeout, a failed initialize, SIGTERM or Ctrl-C during its start or during the goal, and the
 * end of the run. Each test kills rx and whatever carries its marker, however it ends.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { chmodSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, processesWith, sandbox, start, until } from "./helpers.js"

const raw = join(import.meta.dirname, "..", "..", "mcp", "test", "fixtures", "raw.mjs")
const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** A marker unique to one test; whatever carries it in its command line is killed when the test ends. */
const marked = Effect.acquireRelease(
  Effect.sync(() => `rx-mcp-life-${process.pid}-${Math.random().toString(36).slice(2)}`),
  (marker) => Effect.sync(() => processesWith(marker).forEach((pid) => process.kill(pid, "SIGKILL")))
)

/** `rx args...` started, killed when the test ends if it still runs. */
const started = (args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}) =>
  Effect.acquireRelease(Effect.sync(() => start(args, env)), (child) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL")))

/** `rx args...` to its end. */
const rx = (args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}) =>
  Effect.flatMap(started(args, env), (child) => Effect.promise(() => child.done))

/** What `marker` names still running, a moment after rx ended (the kernel reaps what was killed). */
const left = (marker: string) =>
  until(() => processesWith(marker).length === 0, `the processes of ${marker} to end`, 20_000).pipe(
    Effect.catchAllCause(() => Effect.void),
    Effect.map(() => processesWith(marker))
  )

/** A script that, if it ever runs, writes `marker` and then serves nothing. */
const planted = (marker: string) => `#!/usr/bin/env node\nrequire("node:fs").writeFileSync(${JSON.stringify(marker)}, "ran")\n`

describe("MCP servers whose code lies in the workspace", () => {
  it.scoped("are refused in one line that says why and how to allow it, and never run: node srv.mjs, ./srv.mjs, node ., npx ./pkg, a program found on a PATH folder inside the workspace", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const ran = join(box.root, "ran")
      writeFileSync(join(box.workspace, "srv.mjs"), planted(ran).replace("require(\"node:fs\")", "(await import(\"node:fs\"))"))
      writeFileSync(join(box.workspace, "srv.cjs"), planted(ran))
      chmodSync(join(box.workspace, "srv.cjs"), 0o755)
      writeFileSync(join(box.workspace, "package.json"), JSON.stringify({ main: "srv.cjs", bin: { "planted-mcp": "srv.cjs" } }))
      mkdirSync(join(box.workspace, "bin"))
      writeFileSync(join(box.workspace, "bin", "planted-mcp-server"), planted(ran))
      chmodSync(join(box.workspace, "bin", "planted-mcp-server"), 0o755)
      // A PATH folder outside the workspace that is a link into it.
      symlinkSync(join(box.workspace, "bin"), join(box.root, "linked-bin"))
      const common = ["--db", box.db, "--workspace", box.workspace, "--model", "fake"]
      for (const [server, said] of [
        ["h=node srv.mjs", "refused: its script srv.mjs lies in the workspace"],
        ["h=./srv.cjs", "refused: its program"],
        ["h=node .", "refused: its script . lies in the workspace"],
        ["h=npx -y ./", "refused: its package ./ lies in the workspace"],
        [`h=npx -y file:${box.workspace}`, "refused: its package file:"]
      ] as const) {
        const out = yield* rx(["run", ...common, "--mcp", server, "goal"])
        expect(out.code, out.stderr).toBe(1)
        expect(out.stderr.trim().split("\n")).toHaveLength(1)
        expect(out.stderr).toContain(`MCP server h: ${said}`)
        expect(out.stderr).toContain("which the agent can write, and it would run as you, unsandboxed; run it sandboxed (--mcp-sandbox h")
      }
      for (const path of [`${box.workspace}/bin:${process.env["PATH"]}`, `${box.root}/linked-bin:${process.env["PATH"]}`]) {
        const out = yield* rx(["run", ...common, "--mcp", "p=planted-mcp-server", "goal"], { PATH: path })
        expect(out.code, out.stderr).toBe(1)
        expect(out.stderr).toContain("MCP server p: cannot start \"planted-mcp-server\": planted-mcp-server was not found on its PATH")
        expect(out.stderr).toContain("folders inside the workspace are not searched")
      }
      expect(existsSync(ran)).toBe(false)
      expect(existsSync(box.db)).toBe(false)
    }), 120_000)
})

describe("every process of an MCP server is gone when rx gives up on it", () => {
  it.scoped("a start timeout (the message names --mcp-start-timeout), and a failed initialize: the server and the daemon it left are gone when rx exits", () =>
    Effect.gen(function*() {
      const box = sandbox()
      for (const flag of ["--silent", "--fail-initialize"]) {
        const marker = yield* marked
        const out = yield* rx(["run", "--db", box.db, "--workspace", box.workspace, "--model", "fake", "--mcp", `d=node ${raw} ${flag} --daemon ${marker}`, "--mcp-start-timeout", "2", "goal"])
        expect(out.code, out.stderr).toBe(1)
        expect(out.stderr.trim().split("\n")).toHaveLength(1)
        expect(out.stderr).toContain(flag === "--silent" ? "it did not answer initialize within 2 s (a server that builds itself at start may need more: give it a longer --mcp-start-timeout)" : "this server will not start")
        expect(yield* left(marker)).toEqual([])
      }
    }), 120_000)

  it.scoped("SIGTERM or Ctrl-C to rx while a server starts: the server and its daemon are gone", () =>
    Effect.gen(function*() {
      const box = sandbox()
      for (const signal of ["SIGTERM", "SIGINT"] as const) {
        const marker = yield* marked
        const child = yield* started(["run", "--db", box.db, "--workspace", box.workspace, "--model", "fake", "--mcp", `d=node ${raw} --silent --daemon ${marker}`, "--mcp-start-timeout", "600", "goal"])
        yield* until(() => processesWith(`${marker}:daemon`).length > 0, "the daemon to start")
        child.kill(signal)
        const out = yield* Effect.promise(() => child.done)
        expect(out.code === null ? out.signal : out.code, out.stderr).not.toBe(0)
        expect(yield* left(marker)).toEqual([])
      }
    }), 120_000)

  it.scoped("the run's end, and SIGTERM during a call: the server's daemon does not outlive rx", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const marker = yield* marked
      const model = yield* FakeServer.make([call("d__env", {}), done("fine")])
      const out = yield* rx(["run", "--db", box.db, "--workspace", box.workspace, "--base-url", model.baseUrl, "--model", "fake", "--mcp", `d=node ${raw} --daemon ${marker}`, "--json", "go"])
      expect(out.code, out.stderr).toBe(0)
      expect(jsonLines(out.stdout).find((e) => e["_tag"] === "ToolSucceeded")).toMatchObject({ tool: "d__env" })
      // The daemon was started (its server ran): it is gone with rx.
      expect(yield* left(marker)).toEqual([])

      const second = yield* marked
      const appended = join(box.root, "appended.txt")
      const held = yield* FakeServer.make([call("d__append", {}), done("after")])
      const child = yield* started(["run", "--db", box.db, "--workspace", box.workspace, "--base-url", held.baseUrl, "--model", "fake", "--mcp", `d=node ${raw} --daemon ${second} --append ${appended} --hold 60000`, "--json", "go"])
      yield* until(() => existsSync(appended) && processesWith(`${second}:daemon`).length > 0, "the call and the daemon to start")
      child.kill("SIGTERM")
      const stopped = yield* Effect.promise(() => child.done)
      expect(stopped.code, stopped.stderr).toBe(11)
      expect(yield* left(second)).toEqual([])
    }), 120_000)
})
