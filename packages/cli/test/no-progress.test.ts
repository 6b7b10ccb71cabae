/**
 * Loops whose arguments vary but whose results do not end as `no_progress` (behaviour 3), with
 * the real tools: `echo noop1`, `echo noop2`, ... in the sandbox, and read_file with a growing
 * limit past the end of the file. Work that makes progress is never cut: commands that change
 * the workspace (even silently, or printing only their own words), reads of other files with the
 * same text, searches for other things that find nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { bwrapWorks, jsonLines, rx, sandbox } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = call("done", { summary: "finished" })

/** Run a goal whose model calls `calls` then `done`; the log's end. */
const runCalls = (calls: ReadonlyArray<readonly [string, unknown]>, sandboxMode: "bwrap" | "none", setup?: (workspace: string) => void) =>
  Effect.gen(function*() {
    const server = yield* FakeServer.make([...calls.map(([name, args]) => call(name, args)), done])
    const box = sandbox()
    setup?.(box.workspace)
    const ran = yield* rx(["run", "work", "--json", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", sandboxMode, "--max-iterations", "20"])
    const events = jsonLines(ran.stdout)
    const end = events.at(-1)
    return { ran, end, events, goalId: String(events[0]?.["goalId"]), box }
  })

const echoes = Array.from({ length: 8 }, (_, i) => ["shell", { command: `echo noop${i + 1}` }] as const)

describe("no progress seen in results, with the real tools", () => {
  it.scopedLive.skipIf(!bwrapWorks)("echo noop1, echo noop2, ... in the sandbox: no_progress after three, and rx replay agrees", () =>
    Effect.gen(function*() {
      const { box, end, events, goalId } = yield* runCalls(echoes, "bwrap")
      expect(end).toMatchObject({ _tag: "Terminated", reason: "no_progress" })
      expect(String(end?.["detail"])).toContain("3 calls in a row gave the same result, whatever their arguments")
      expect(events.filter((e) => e["_tag"] === "ToolStarted")).toHaveLength(3)
      expect(events.find((e) => e["_tag"] === "ToolSucceeded")).toMatchObject({ output: { workspace_changed: false } })
      const replayed = yield* rx(["replay", goalId, "--db", box.db])
      expect(replayed.stdout).toContain("identical")
    }), 120_000)

  it.scopedLive("read_file with a growing limit past the end of the file: no_progress after three", () =>
    Effect.gen(function*() {
      const { end, events } = yield* runCalls([5, 10, 15, 20, 25].map((limit) => ["read_file", { path: "hello.txt", limit }] as const), "none")
      expect(end).toMatchObject({ _tag: "Terminated", reason: "no_progress" })
      expect(events.filter((e) => e["_tag"] === "ToolStarted")).toHaveLength(3)
    }), 120_000)

  it.scopedLive.skipIf(!bwrapWorks)("commands that change the workspace are never cut: silent ones, and ones that print only their own words", () =>
    Effect.gen(function*() {
      const steps = [
        ["shell", { command: "mkdir a" }],
        ["shell", { command: "mkdir b" }],
        ["shell", { command: "touch c" }],
        ["shell", { command: "mkdir d && echo d" }],
        ["shell", { command: "mkdir e && echo e" }],
        ["shell", { command: "mkdir f && echo f" }],
        ["shell", { command: "echo x > g && echo done" }],
        ["shell", { command: "echo y > g && echo done" }],
        ["shell", { command: "echo z > g && echo done" }]
      ] as const
      const { end } = yield* runCalls(steps, "bwrap")
      expect(end).toMatchObject({ _tag: "Terminated", reason: "done" })
    }), 120_000)

  it.scopedLive.skipIf(!bwrapWorks)("commands that read different things are never cut", () =>
    Effect.gen(function*() {
      const steps = ["one", "two", "three", "four"].map((name) => ["shell", { command: `cat ${name}.txt` }] as const)
      const { end } = yield* runCalls(steps, "bwrap", (workspace) => {
        for (const [i, name] of ["one", "two", "three", "four"].entries()) writeFileSync(join(workspace, `${name}.txt`), `line ${i}\n`)
      })
      expect(end).toMatchObject({ _tag: "Terminated", reason: "done" })
    }), 120_000)

  it.scopedLive("reads of other files with the same text, and searches for other things that find nothing, are never cut", () =>
    Effect.gen(function*() {
      const steps = [
        ["read_file", { path: "a.txt" }],
        ["read_file", { path: "b.txt" }],
        ["read_file", { path: "c.txt" }],
        ["find_files", { pattern: "*.rs" }],
        ["find_files", { pattern: "*.go" }],
        ["find_files", { pattern: "*.py" }],
        ["search_text", { pattern: "alpha" }],
        ["search_text", { pattern: "beta" }],
        ["search_text", { pattern: "gamma" }]
      ] as const
      const { end } = yield* runCalls(steps, "none", (workspace) => {
        for (const name of ["a", "b", "c"]) writeFileSync(join(workspace, `${name}.txt`), "the same text\n")
      })
      expect(end).toMatchObject({ _tag: "Terminated", reason: "done" })
    }), 120_000)
})
