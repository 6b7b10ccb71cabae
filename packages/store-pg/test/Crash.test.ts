/**
 * Crash tests with real processes on Postgres: a runner child is killed with SIGKILL at each point
 * of an iteration and at random moments, then another process resumes the goal to its end. No
 * completed call runs twice, a non-idempotent call cut short is recorded as unknown, and the log
 * replays. Needs the built packages (`pnpm build`): the child is plain Node running `dist/`.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option, Schema, type Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Event, Replay, type StateStore } from "@rx/kernel"
import { PgStore } from "@rx/store-pg"
import { endsOnce } from "./fixtures.js"
import * as TestDatabase from "./database.js"
import * as Processes from "./processes.js"

const encode = Schema.encodeSync(Event.Event)

const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "rx-pg-crash-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

const ledgerOf = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter((line) => line !== "") : [])

/** The goal's log, read through the store (which checks seqs and decoding). */
const inspect = (store: StateStore.StateStore["Type"], goalId: string) =>
  Effect.gen(function*() {
    const events = yield* store.load(goalId)
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
    return events
  })

/** What must hold of every finished log and its ledger. */
const checkFinished = (events: ReadonlyArray<Event.Event>, ledger: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    expect(endsOnce(events)).toBe(true)
    // No iteration ran twice: one answer and one completion per iteration.
    const answers = events.filter((e) => e._tag === "ModelResponded")
    expect(answers).toHaveLength(new Set(answers.map((e) => e.iteration)).size)
    expect(events.filter((e) => e._tag === "IterationCompleted")).toHaveLength(answers.length)
    // A non-idempotent call never ran twice, nor without its ToolStarted committed first.
    const appends = ledger.filter((line) => line.startsWith("append "))
    expect(new Set(appends).size).toBe(appends.length)
    const started = new Set(events.flatMap((e) => (e._tag === "ToolStarted" ? [e.callId] : [])))
    for (const line of ledger) expect(started.has(line.split(" ")[1] ?? "")).toBe(true)
    // Every call that ran has an outcome: succeeded, or unknown if it was cut short.
    const outcomes = new Set(events.flatMap((e) => (e._tag === "ToolSucceeded" || e._tag === "ToolFailed" ? [e.callId] : [])))
    for (const line of ledger) expect(outcomes.has(line.split(" ")[1] ?? "")).toBe(true)
    expect((yield* Replay.verify(events)).reason).toBe("done")
  })

const points = ["ModelResponded", "ToolStarted", "during", "outcome", "IterationCompleted"] as const

describe("crash tests on Postgres: SIGKILL a runner process, then resume from another", () => {
  layer(TestDatabase.layer, { excludeTestServices: true, timeout: "30 seconds" })((it) => {
    it("the built packages are present (run `pnpm build` first)", () => {
      expect(Processes.isBuilt()).toBe(true)
    })

    for (const point of points) {
      // Iteration 1 calls the non-idempotent `append`, iteration 2 the idempotent `echo`.
      for (const iteration of [1, 2]) {
        it.scoped(`killed at ${point} of iteration ${iteration}`, () =>
          Effect.gen(function*() {
            const { url } = yield* TestDatabase.TestDatabase
            const store = yield* PgStore.make({ url })
            const ledger = path.join(yield* tempDir, "ledger")
            const goalId = `g-${point}-${iteration}`
            const killed = yield* Processes.run([url, "run", goalId, ledger, point, String(iteration)])
            expect(killed.signal, killed.stdout + killed.stderr).toBe("SIGKILL")
            const before = yield* inspect(store, goalId)
            expect(before.some((e) => e._tag === "Terminated")).toBe(false)
            const ledgerBefore = ledgerOf(ledger)

            // Another process resumes at once: the killed runner's lease ended with its session.
            const resumed = yield* Processes.run([url, "resume", goalId, ledger])
            expect([resumed.code, resumed.stderr], resumed.stdout).toEqual([0, ""])
            const after = yield* inspect(store, goalId)
            expect(after.slice(0, before.length).map((e) => encode(e))).toEqual(before.map((e) => encode(e)))
            const ledgerAfter = ledgerOf(ledger)
            yield* checkFinished(after, ledgerAfter)
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
              // The idempotent call simply runs again.
              expect(outcome?._tag).toBe("ToolSucceeded")
              expect(runs).toBe(point === "during" ? 2 : 1)
            } else {
              expect(outcome?._tag).toBe("ToolSucceeded")
              expect(runs).toBe(1)
            }
            expect(Option.map(yield* store.goal(goalId), (s) => s.status)).toEqual(Option.some("terminated"))
          }), 60_000)
      }
    }

    it.scoped("killed at random moments, again and again, then resumed to the end", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.TestDatabase
        const store = yield* PgStore.make({ url })
        const ledger = path.join(yield* tempDir, "ledger")
        const goalId = "g-random"
        const delays: Array<number> = []
        let kills = 0
        for (let round = 0; round < 5; round++) {
          const exists = (yield* inspect(store, goalId)).length > 0
          // Four calls of 400 ms each: a whole run takes longer than the longest delay (1.5 s) on any
          // machine, so the first round is always cut short, and later ones at random points.
          const delay = 300 + Math.floor(Math.random() * 1_200)
          delays.push(delay)
          const exit = yield* Processes.run([url, exists ? "resume" : "run", goalId, ledger, "none", "0", "400"], delay)
          if (exit.code === 0) break
          expect(exit.signal, `delays ${delays.join(", ")}: ${exit.stdout}${exit.stderr}`).toBe("SIGKILL")
          kills++
          const appends = ledgerOf(ledger).filter((line) => line.startsWith("append "))
          expect(new Set(appends).size, `delays ${delays.join(", ")}`).toBe(appends.length)
        }
        const exists = (yield* inspect(store, goalId)).length > 0
        const last = yield* Processes.run([url, exists ? "resume" : "run", goalId, ledger])
        expect([last.code, last.stderr], `delays ${delays.join(", ")}: ${last.stdout}`).toEqual([0, ""])
        yield* checkFinished(yield* inspect(store, goalId), ledgerOf(ledger))
        expect(kills, `delays ${delays.join(", ")}`).toBeGreaterThan(0)
      }), 120_000)

    it.scoped("two runner processes on one goal: one finishes, the other stops as busy", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.TestDatabase
        const store = yield* PgStore.make({ url })
        const ledger = path.join(yield* tempDir, "ledger")
        const goalId = "g-two"
        yield* Processes.run([url, "run", goalId, ledger, "IterationCompleted", "1"])
        const [a, b] = yield* Effect.all(
          [
            Processes.run([url, "resume", goalId, ledger, "none", "0", "300"]),
            Processes.run([url, "resume", goalId, ledger, "none", "0", "300"])
          ],
          { concurrency: 2 }
        )
        expect([a.code, b.code].sort(), a.stdout + b.stdout).toEqual([0, 3])
        expect((a.code === 3 ? a : b).stdout).toContain("is being run elsewhere")
        yield* checkFinished(yield* inspect(store, goalId), ledgerOf(ledger))
      }), 60_000)
  })
})
