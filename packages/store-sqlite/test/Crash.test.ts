/**
 * Crash tests with real processes: a runner child over a SQLite file is killed with SIGKILL at
 * each point of an iteration and at random moments, then resumed. Needs the built packages
 * (`pnpm build`): the child is plain Node running `dist/`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Layer, Option, Schema, Stream } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Event, Replay, StateStore } from "@rx/kernel"
import { endsOnce } from "./fixtures.js"
import { exec, layerWithClient, tempDir } from "./helpers.js"

const child = fileURLToPath(new URL("./fixtures/runner-child.mjs", import.meta.url))
const built = fileURLToPath(new URL("../dist/src/index.js", import.meta.url))

interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** Run the child; SIGKILL it when it prints `KILLPOINT`, or after `killAfterMs`. */
const runChild = (args: ReadonlyArray<string>, killAfterMs?: number) =>
  Effect.async<Exit>((resume) => {
    const proc = spawn(process.execPath, [child, ...args], { stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    proc.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk
      if (stdout.includes("KILLPOINT\n")) proc.kill("SIGKILL")
    })
    proc.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk
    })
    const timer = killAfterMs === undefined ? undefined : setTimeout(() => proc.kill("SIGKILL"), killAfterMs)
    proc.on("exit", (code, signal) => {
      clearTimeout(timer)
      resume(Effect.succeed({ code, signal, stdout, stderr }))
    })
    return Effect.sync(() => proc.kill("SIGKILL"))
  })

const encode = Schema.encodeSync(Event.Event)

/** Open the file, check its integrity and return the goal's log (load checks seqs and decoding). */
const inspect = (db: string, goalId: string) =>
  Effect.gen(function*() {
    const integrity = yield* exec("PRAGMA integrity_check")
    expect(integrity).toEqual([{ integrity_check: "ok" }])
    const store = yield* StateStore.StateStore
    const events = yield* store.load(goalId)
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
    return events
  }).pipe(Effect.provide(layerWithClient({ filename: db })))

const ledgerOf = (file: string) =>
  fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter((line) => line !== "") : []

/** What must hold of every finished log and its ledger. */
const checkFinished = (events: ReadonlyArray<Event.Event>, ledger: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    expect(endsOnce(events)).toBe(true)
    // No iteration ran twice: one answer and one completion per iteration.
    const iterations = new Set(events.filter((e) => e._tag === "ModelResponded").map((e) => e.iteration))
    expect(events.filter((e) => e._tag === "ModelResponded")).toHaveLength(iterations.size)
    expect(events.filter((e) => e._tag === "IterationCompleted")).toHaveLength(iterations.size)
    // A non-idempotent call never ran twice, and never ran without its ToolStarted committed first.
    const appends = ledger.filter((line) => line.startsWith("append "))
    expect(new Set(appends).size).toBe(appends.length)
    const started = new Set(events.flatMap((e) => (e._tag === "ToolStarted" ? [e.callId] : [])))
    for (const line of ledger) expect(started.has(line.split(" ")[1] ?? "")).toBe(true)
    // Every append that ran has an outcome: succeeded, or unknown if it was interrupted.
    const outcomes = new Map(events.flatMap((e) => (e._tag === "ToolSucceeded" || e._tag === "ToolFailed" ? [[e.callId, e] as const] : [])))
    for (const line of appends) expect(outcomes.has(line.split(" ")[1] ?? "")).toBe(true)
    const replayed = yield* Replay.verify(events)
    expect(replayed.reason).toBe("done")
  })

const points = ["ModelResponded", "ToolStarted", "during", "outcome", "IterationCompleted"] as const

describe("crash tests: SIGKILL a runner process, then resume", () => {
  it("the built packages are present (run `pnpm build` first)", () => {
    expect(fs.existsSync(built)).toBe(true)
  })

  for (const point of points) {
    // Iteration 1 calls the non-idempotent `append`, iteration 2 the idempotent `echo`.
    for (const iteration of [1, 2]) {
      it.live(`killed at ${point} of iteration ${iteration}`, () =>
        Effect.gen(function*() {
          const dir = yield* tempDir
          const db = path.join(dir, "rx.db")
          const ledger = path.join(dir, "ledger")
          const goalId = `g-${point}-${iteration}`
          const killed = yield* runChild([db, goalId, ledger, "run", point, String(iteration)])
          expect(killed.signal, killed.stderr).toBe("SIGKILL")
          const before = yield* inspect(db, goalId)
          expect(before.some((e) => e._tag === "Terminated")).toBe(false)
          const ledgerBefore = ledgerOf(ledger)

          const resumed = yield* runChild([db, goalId, ledger, "resume"])
          expect([resumed.code, resumed.stderr], resumed.stdout).toEqual([0, ""])
          const after = yield* inspect(db, goalId)
          // The log before the kill is kept as it was.
          expect(after.slice(0, before.length).map((e) => encode(e))).toEqual(before.map((e) => encode(e)))
          const ledgerAfter = ledgerOf(ledger)
          yield* checkFinished(after, ledgerAfter)
          // Calls completed before the kill did not run again.
          expect(ledgerAfter.slice(0, ledgerBefore.length)).toEqual(ledgerBefore)
          const callId = `${goalId}:${iteration}`
          const outcome = after.find((e) => (e._tag === "ToolSucceeded" || e._tag === "ToolFailed") && e.callId === callId)
          const runs = ledgerAfter.filter((line) => line.endsWith(` ${callId}`)).length
          const interrupted = point === "ModelResponded" || point === "ToolStarted" || point === "during"
          if (interrupted && iteration === 1) {
            // The non-idempotent call was cut short: never run again, recorded as unknown.
            expect(outcome).toMatchObject({ _tag: "ToolFailed", error: { kind: "unknown" } })
            expect(runs).toBe(point === "during" ? 1 : 0)
          } else if (interrupted) {
            // The idempotent call is simply run again.
            expect(outcome?._tag).toBe("ToolSucceeded")
            expect(runs).toBe(point === "during" ? 2 : 1)
          } else {
            expect(outcome?._tag).toBe("ToolSucceeded")
            expect(runs).toBe(1)
          }
        }).pipe(Effect.scoped), 60_000)
    }
  }

  it.live("killed at random moments, again and again, then resumed to the end", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const db = path.join(dir, "rx.db")
      const ledger = path.join(dir, "ledger")
      const goalId = "g-random"
      const delays: Array<number> = []
      let kills = 0
      for (let round = 0; round < 6; round++) {
        const exists = fs.existsSync(db) && (yield* inspect(db, goalId)).length > 0
        // Calls of 400 ms each: a whole run takes longer than the longest delay (1.4 s) on any
        // machine, so the first round is always cut short, and later ones at random points.
        const delay = 200 + Math.floor(Math.random() * 1_200)
        delays.push(delay)
        const exit = yield* runChild([db, goalId, ledger, exists ? "resume" : "run", "none", "0", "400"], delay)
        if (exit.code === 0) break
        expect(exit.signal, `delays ${delays.join(", ")}: ${exit.stdout}${exit.stderr}`).toBe("SIGKILL")
        kills++
        yield* inspect(db, goalId)
        const appends = ledgerOf(ledger).filter((line) => line.startsWith("append "))
        expect(new Set(appends).size, `delays ${delays.join(", ")}`).toBe(appends.length)
      }
      const exists = fs.existsSync(db) && (yield* inspect(db, goalId)).length > 0
      const last = yield* runChild([db, goalId, ledger, exists ? "resume" : "run"])
      expect([last.code, last.stderr], `delays ${delays.join(", ")}: ${last.stdout}`).toEqual([0, ""])
      yield* checkFinished(yield* inspect(db, goalId), ledgerOf(ledger))
      expect(kills, `delays ${delays.join(", ")}`).toBeGreaterThan(0)
    }).pipe(Effect.scoped), 120_000)

  it.live("changes here follows a run in another process, event by event, to its end", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const db = path.join(dir, "rx.db")
      const goalId = "g-follow"
      const store = yield* Layer.build(layerWithClient({ filename: db, pollIntervalMs: 20 }))
      const follow = yield* Effect.flatMap(StateStore.StateStore, (s) =>
        s.changes(goalId, 0).pipe(
          Stream.takeUntil((e) => e._tag === "Terminated"),
          Stream.runCollect
        )).pipe(Effect.provide(store), Effect.fork)
      const exit = yield* runChild([db, goalId, path.join(dir, "ledger"), "run", "none", "0", "20"])
      expect(exit.code, exit.stderr).toBe(0)
      const followed = Chunk.toReadonlyArray(yield* Fiber.join(follow).pipe(Effect.timeout("20 seconds")))
      const stored = yield* Effect.flatMap(StateStore.StateStore, (s) => s.load(goalId)).pipe(Effect.provide(store))
      expect(followed.map((e) => encode(e))).toEqual(stored.map((e) => encode(e)))
      expect(endsOnce(followed)).toBe(true)
    }).pipe(Effect.scoped), 60_000)

  it.live("two runner processes on one goal: one finishes, the other stops as busy", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const db = path.join(dir, "rx.db")
      const ledger = path.join(dir, "ledger")
      const goalId = "g-two"
      yield* runChild([db, goalId, ledger, "run", "IterationCompleted", "1"])
      const [a, b] = yield* Effect.all(
        [runChild([db, goalId, ledger, "resume", "none", "0", "300"]), runChild([db, goalId, ledger, "resume", "none", "0", "300"])],
        { concurrency: 2 }
      )
      expect([a.code, b.code].sort(), a.stdout + b.stdout).toEqual([0, 3])
      expect((a.code === 3 ? a : b).stdout).toContain("is being run elsewhere")
      const events = yield* inspect(db, goalId)
      yield* checkFinished(events, ledgerOf(ledger))
      const summary = yield* Effect.flatMap(StateStore.StateStore, (s) => s.goal(goalId)).pipe(
        Effect.provide(Layer.fresh(layerWithClient({ filename: db })))
      )
      expect(Option.map(summary, (s) => s.status)).toEqual(Option.some("terminated"))
    }).pipe(Effect.scoped), 60_000)
})
