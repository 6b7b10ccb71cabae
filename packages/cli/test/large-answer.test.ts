/**
 * One answer with thousands of tool calls, through the rx binary and a real SQLite log: the
 * goal is recorded, suspended and resumed, and the log stays small. A goal written under
 * behaviour 2 (one rejection per call past the cap, thousands in one batch) resumes too.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox } from "./helpers.js"

/** An answer of `n` calls, cycling through four read-only tools (no call repeats the one before). */
const manyCalls = (n: number) =>
  FakeServer.completion({
    toolCalls: Array.from({ length: n }, (_, i) => {
      const [name, input] = [
        ["read_file", { path: "hello.txt" }],
        ["list_dir", {}],
        ["find_files", { pattern: "*.txt" }],
        ["search_text", { pattern: "hello" }]
      ][i % 4] as [string, unknown]
      return { id: `call_${i}`, name, arguments: JSON.stringify(input) }
    })
  })
const done = FakeServer.completion({ toolCalls: [{ name: "done", arguments: JSON.stringify({ summary: "finished" }) }] })

/** The SQLite file's bytes with its WAL (what the log holds on disk now). */
const onDisk = (db: string) => [db, `${db}-wal`].reduce((n, file) => n + (statSync(file, { throwIfNoEntry: false })?.size ?? 0), 0)

describe("an answer with thousands of calls, through rx and SQLite", () => {
  for (const n of [6_000, 10_000]) {
    it.scopedLive(`${n} calls: rx run records one rejection for the calls past the cap, suspends, and rx resume finishes`, () =>
      Effect.gen(function*() {
        const box = sandbox()
        // The answer, then the server is down (503): the goal is suspended, open.
        const first = yield* FakeServer.make([manyCalls(n), FakeServer.error(503, "overloaded")])
        const flags = ["--db", box.db, "--workspace", box.workspace, "--model", "fake", "--sandbox", "none", "--retries", "0"]
        const ran = yield* rx(["run", "read everything at once", "--base-url", first.baseUrl, "--json", ...flags])
        expect(ran.stderr).toContain("rx resume")
        expect(ran.code).toBe(11)
        const events = jsonLines(ran.stdout)
        const goalId = String(events[0]?.["goalId"])
        expect(events.filter((e) => e["_tag"] === "ToolStarted")).toHaveLength(8)
        const rejected = events.filter((e) => e["_tag"] === "ActionRejected")
        expect(rejected).toHaveLength(1)
        expect(rejected[0]).toMatchObject({ kind: "too_many_calls", dropped: n - 8 })
        // The answer is recorded once (under 1 MB, maxAnswerChars); nothing per dropped call.
        expect(onDisk(box.db)).toBeLessThan(2_000_000)

        const second = yield* FakeServer.make([done])
        const resumed = yield* rx(["resume", goalId, "--base-url", second.baseUrl, "--db", box.db])
        expect(resumed.stderr).toBe("")
        expect(resumed.code).toBe(0)
        expect(second.received.map((r) => r.invalid)).toEqual([undefined])
        const replayed = yield* rx(["replay", goalId, "--db", box.db])
        expect(replayed.stdout).toContain("identical")
        expect(replayed.code).toBe(0)
      }), 300_000)
  }

  it.scopedLive("a goal of behaviour 2 (an older rx's log) resumes through a 6,000-call answer: 5,992 rejections in one commit", () =>
    Effect.gen(function*() {
      const golden = join(import.meta.dirname, "..", "..", "kernel", "test", "logs", "v0.2-behaviour-2")
      const manifest = JSON.parse(readFileSync(join(golden, "manifest.json"), "utf8")) as {
        readonly db: string
        readonly goals: ReadonlyArray<{ readonly name: string; readonly goalId: string }>
      }
      const goalId = manifest.goals.find((g) => g.name === "open")?.goalId ?? ""
      const dir = mkdtempSync(join(tmpdir(), "rx-large-"))
      const db = join(dir, "rx.db")
      copyFileSync(join(golden, manifest.db), db)
      const workspace = join(dir, "ws")
      mkdirSync(workspace)
      writeFileSync(join(workspace, "hello.txt"), "hello from the workspace\n")
      const server = yield* FakeServer.make([manyCalls(6_000), done])
      const resumed = yield* rx(["resume", goalId, "--db", db, "--workspace", workspace, "--base-url", server.baseUrl, "--json"])
      expect(resumed.stderr).toBe("")
      expect(resumed.code).toBe(0)
      const events = jsonLines(resumed.stdout)
      expect(events.filter((e) => e["_tag"] === "ActionRejected" && e["kind"] === "too_many_calls")).toHaveLength(5_992)
      const replayed = yield* rx(["replay", goalId, "--db", db])
      expect(replayed.stdout).toContain("identical")
      expect(replayed.code).toBe(0)
    }), 300_000)
})
