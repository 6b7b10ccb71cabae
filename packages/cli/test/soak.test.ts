/**
 * A random-SIGKILL soak: `rx run` killed at a random moment (starting, asking the model, in the
 * middle of a sandboxed shell call or a write), then `rx resume` to the end, `RX_SOAK_LOOPS` times (24 by default), in
 * workspaces with no config file and no `.git`. Every resume must succeed, and afterwards the
 * workspace must hold what the tools wrote and nothing rx made for itself. A longer soak (an
 * audit's thousands of kills) sets `RX_SOAK_LOOPS`; CI's share keeps the suite within its time.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdirSync, readdirSync } from "node:fs"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { busyModel, bwrapWorks, jsonLines, rx, sandbox, start, until } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const body = (reply: FakeServer.Reply) => (reply.kind === "json" ? reply.body : null)

/** How many tool results a request carries: which step of the script the goal is at. */
const results = (request: unknown): number =>
  typeof request === "object" && request !== null && "messages" in request && Array.isArray(request.messages)
    ? request.messages.filter((m: unknown) => typeof m === "object" && m !== null && "role" in m && m.role === "tool").length
    : 0

const script = [
  call("write_file", { path: "a.txt", content: "a\n" }),
  call("shell", { command: "sleep 0.4; echo b > b.txt" }),
  call("shell", { command: "echo c > c.txt" }),
  call("done", { summary: "wrote a, b and c" })
]

const loops = Math.max(2, Number(process.env["RX_SOAK_LOOPS"] ?? "24") || 24)

describe.skipIf(!bwrapWorks)("rx run killed at random, then resumed", () => {
  it.scopedLive(`${loops} loops: each kill is followed by a successful resume; the workspace holds only what the tools wrote`, () =>
    Effect.gen(function*() {
      // How many model requests each loop's goal has made: kills are timed from one of them, so
      // neither a loaded machine's slow start-up nor a quick one moves them all out of the goal.
      const asked = new Map<number, number>()
      const model = yield* busyModel(20, (request) => {
        const loop = /soak (\d+)/.exec(JSON.stringify(request))
        if (loop !== null) asked.set(Number(loop[1]), (asked.get(Number(loop[1])) ?? 0) + 1)
        return body(script[Math.min(results(request), script.length - 1)] ?? call("done", { summary: "x" }))
      })
      const kills = { beforeGoal: 0, open: 0, finished: 0 }
      const loop = (i: number) =>
        Effect.gen(function*() {
          const box = sandbox()
          // Every other loop keeps its log inside the workspace, in a folder of its own.
          const inside = i % 2 === 1
          const db = inside ? join(box.workspace, ".rx", "rx.db") : box.db
          if (inside) mkdirSync(join(box.workspace, ".rx"))
          const common = ["--db", db, "--base-url", model.baseUrl, "--model", "fake"]
          const run = start(["run", `soak ${i}`, "--json", "--workspace", box.workspace, "--sandbox", "bwrap", ...common])
          // One loop in ten is killed while starting; the others after one of the first three model
          // requests (before the write, either shell call, or the last answer), at a random moment.
          if (i % 10 !== 0) {
            const request = 1 + Math.floor(Math.random() * 3)
            yield* until(() => (asked.get(i) ?? 0) >= request || run.exitCode !== null, `loop ${i} to reach the model`, 600_000)
          }
          yield* Effect.sleep(`${Math.floor(Math.random() * (i % 10 === 0 ? 500 : 600))} millis`)
          run.kill("SIGKILL")
          const ran = yield* Effect.promise(() => run.done)
          // The goal's id as the run printed it, or from the log when it was killed before printing.
          const printed = jsonLines(ran.stdout).find((e) => e["_tag"] === "GoalSubmitted")
          const listed = printed !== undefined ? [printed] : jsonLines((yield* rx(["list", "--json", "--db", db])).stdout)
          if (listed.length === 0) {
            // Killed before the goal was recorded: nothing to resume, nothing may be left either.
            kills.beforeGoal++
          } else if (ran.code === 0) {
            kills.finished++
          } else {
            kills.open++
            const goalId = String(listed[0]?.["goalId"])
            const resumed = yield* rx(["resume", goalId, ...common])
            expect(resumed.code, `loop ${i}: ${resumed.stderr}`).toBe(0)
            if (i % 5 === 1) expect((yield* rx(["replay", goalId, "--db", db])).code).toBe(0)
          }
          const left = readdirSync(box.workspace).sort()
          const allowed = new Set(["hello.txt", "a.txt", "b.txt", "c.txt", ...(inside ? [".rx"] : [])])
          expect(left.filter((name) => !allowed.has(name)), `loop ${i} left ${left.join(", ")}`).toEqual([])
          if (inside) {
            const logFiles = readdirSync(join(box.workspace, ".rx"))
            expect(logFiles.filter((name) => !["rx.db", "rx.db-wal", "rx.db-shm"].includes(name)), `loop ${i}`).toEqual([])
          }
          // Nothing an earlier rx left stops the next command here (the resume showed it too).
          if (i % 5 === 2) {
            const config = yield* rx(["config"], {}, box.workspace)
            expect(config.code, config.stderr).toBe(0)
          }
        })
      yield* Effect.forEach(Array.from({ length: loops }, (_, i) => i), loop, { concurrency: 2, discard: true })
      // The kills must have landed in the middle of goals, not only around them.
      expect(kills.open, JSON.stringify(kills)).toBeGreaterThanOrEqual(loops / 2)
    }), 900_000)
})
