/**
 * Goals spread over real worker processes on a real Postgres: three workers (test/fixtures/
 * worker.mjs) drive the goals this process submits through a cluster client. Every goal ends
 * exactly once, its log is contiguous and replays, and no call of the non-idempotent tool is
 * written to the ledger twice; with one worker SIGKILLed mid-run, its goals finish on the others
 * within the configured failover time.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema, type Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type Event, Replay, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { GoalEntity, Workers } from "@rx/cluster"
import { Delegate } from "@rx/tools"
import * as TestDatabase from "../../store-pg/test/database.js"
import * as Processes from "./processes.js"

/** The workers' tools as this process records them in `GoalSubmitted` (it never runs them). */
const tool = (name: string, idempotent: boolean) =>
  Tool.make({
    name,
    description: `${name} a text (${idempotent ? "idempotent" : "not idempotent: writes the ledger"}).`,
    input: Schema.Struct({ text: Schema.String }),
    output: Schema.Struct({ text: Schema.String }),
    idempotent,
    execute: () => Effect.dieMessage("the test process runs no tools")
  })
const tools = ToolRegistry.layer([tool("append", false), tool("echo", true)])
/** The same, and `delegate`, as a goal offered sub-goals records them. */
const delegating = Layer.effect(ToolRegistry.ToolRegistry, Effect.map(ToolRegistry.make([tool("append", false), tool("echo", true)]), Delegate.offer))

/** Goals per test (`RX_TEST_GOALS`): every worker holds several at once. */
const goals = Number(process.env["RX_TEST_GOALS"] ?? "60")

const settings = { refreshAssignmentsMs: 500, pollMs: 1000, shardsPerGroup: 30 } as const

const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "rx-cluster-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** Ledger lines: `<callId> <worker>`. */
const ledgerOf = (file: string) =>
  (fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter((line) => line !== "") : []).map((line) => {
    const [callId = "", worker = ""] = line.split(" ")
    return { callId, worker, goalId: callId.slice(0, callId.indexOf(":")) }
  })

/** A fresh database and `count` workers on it, started one after another; all killed with the scope. */
const cluster = (count: number, failoverMs: number, slowMs: number) =>
  Effect.gen(function*() {
    const { url } = yield* TestDatabase.fresh
    const ledger = path.join(yield* tempDir, "ledger")
    const workers: Array<Processes.Child & { readonly name: string }> = []
    for (let i = 1; i <= count; i++) {
      const name = `w${i}`
      const port = yield* Processes.freePort
      const child = yield* Processes.start([name, url, String(port), String(failoverMs), ledger, String(slowMs)])
      yield* Effect.orDie(child.waitFor("READY", 30_000))
      workers.push({ ...child, name })
    }
    const client = Layer.merge(Workers.layerClient({ url, failoverMs, ...settings }), tools)
    return { url, ledger, workers, client }
  })

/** Poll the store until every goal is terminated; on timeout, say which are open and what the workers printed. */
const allEnded = (goalIds: ReadonlyArray<string>, timeoutMs: number, workers: ReadonlyArray<Processes.Child>) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    let open: ReadonlyArray<string> = goalIds
    const poll = Effect.gen(function*() {
      while (true) {
        const summaries = yield* Effect.forEach(goalIds, (goalId) => store.goal(goalId))
        open = summaries.flatMap((s, i) => (Option.isSome(s) && s.value.status === "terminated" ? [] : [`${goalIds[i]}@${Option.isSome(s) ? s.value.nextSeq : "?"}`]))
        if (open.length === 0) return
        yield* Effect.sleep("200 millis")
      }
    })
    yield* poll.pipe(Effect.timeoutFail({
      duration: timeoutMs,
      onTimeout: () =>
        new Error(`not every goal ended within ${timeoutMs} ms; open (at seq): ${open.join(" ")}\n${workers.map((w) => w.output().slice(-3000)).join("\n---\n")}`)
    }))
  })

/** What must hold of every goal's log and of the ledger; returns the logs. */
const checkAll = (goalIds: ReadonlyArray<string>, ledger: string) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const logs = new Map<string, ReadonlyArray<Event.Event>>()
    for (const goalId of goalIds) {
      const events = yield* store.load(goalId)
      logs.set(goalId, events)
      expect(events.map((e) => e.seq), goalId).toEqual(events.map((_, i) => i))
      expect(events.filter((e) => e._tag === "Terminated"), goalId).toHaveLength(1)
      expect(events[events.length - 1]?._tag, goalId).toBe("Terminated")
      const answers = events.filter((e) => e._tag === "ModelResponded")
      expect(answers, goalId).toHaveLength(new Set(answers.map((e) => e.iteration)).size)
      expect((yield* Replay.verify(events)).reason, goalId).toBe("done")
    }
    // No call of `append` ran twice, and each ran after its ToolStarted was committed.
    const lines = ledgerOf(ledger)
    expect(new Set(lines.map((l) => l.callId)).size).toBe(lines.length)
    for (const line of lines) {
      const started = (logs.get(line.goalId) ?? []).some((e) => e._tag === "ToolStarted" && e.callId === line.callId && e.tool === "append")
      expect(started, line.callId).toBe(true)
    }
    return { logs, lines }
  })

const submitAll = (count: number) =>
  Effect.forEach(
    Array.from({ length: count }, (_, i) => i + 1),
    (i) => Workers.submit({ goal: `write the ledger (${i})`, goalId: `goal-${i}`, options: { maxIterations: 20 } })
  )

/** The first line a worker writes to the ledger, once one has. */
const firstLine = (ledger: string) =>
  Effect.gen(function*() {
    while (true) {
      const line = ledgerOf(ledger)[0]
      if (line !== undefined) return line
      yield* Effect.sleep("20 millis")
    }
  }).pipe(Effect.timeoutFail({ duration: 20_000, onTimeout: () => new Error("no worker wrote the ledger") }))

describe("goals over three worker processes (@effect/cluster on Postgres)", () => {
  it.scopedLive("every goal ends exactly once, with a contiguous log that replays", () =>
    Effect.gen(function*() {
      const { client, ledger, workers } = yield* cluster(3, 4_000, 50)
      yield* Effect.gen(function*() {
        const goalIds = yield* submitAll(goals)
        yield* allEnded(goalIds, 40_000, workers)
        const { lines } = yield* checkAll(goalIds, ledger)
        // Two calls of `append` per goal, and the goals were spread over the workers.
        expect(lines).toHaveLength(2 * goals)
        expect(new Set(lines.map((l) => l.worker)).size, workers.map((w) => w.output()).join("\n")).toBeGreaterThan(1)
        // A duplicate send is harmless: the ended goal appends nothing. Its reply is awaited, so
        // the log is compared after the drive ran, however slowly.
        const store = yield* StateStore.StateStore
        const before = (yield* store.load("goal-1")).length
        const driven = yield* Effect.flatMap(GoalEntity.GoalEntity.client, (client) => client("goal-1").Drive(undefined))
        expect(driven).toMatchObject({ status: "terminated", reason: "done" })
        expect((yield* store.load("goal-1")).length).toBe(before)
      }).pipe(Effect.provide(client))
    }), { timeout: 90_000 })

  it.scopedLive("a worker SIGKILLed mid-run: its goals finish on the others within the failover time", () =>
    Effect.gen(function*() {
      const failoverMs = 4_000
      const { client, ledger, workers } = yield* cluster(3, failoverMs, 300)
      yield* Effect.gen(function*() {
        const goalIds = yield* submitAll(goals)
        // Kill the first worker seen writing the ledger, while its goals run.
        const first = yield* firstLine(ledger)
        const victim = workers.find((w) => w.name === first.worker)
        expect(victim).toBeDefined()
        if (victim === undefined) return
        yield* victim.kill("SIGKILL")
        const killedAt = Date.now()
        expect((yield* victim.exit).signal).toBe("SIGKILL")

        yield* allEnded(goalIds, 45_000, workers)
        const { lines, logs } = yield* checkAll(goalIds, ledger)
        // The victim's goals that were still open when it died ended later, on the others, within
        // the failover time plus what is left of a goal's run (four calls of 300 ms) and a margin.
        const victimGoals = new Set(lines.filter((l) => l.worker === victim.name).map((l) => l.goalId))
        const movedEnds = [...victimGoals].flatMap((goalId) => {
          const end = (logs.get(goalId) ?? []).find((e) => e._tag === "Terminated")
          return end !== undefined && end.at > killedAt ? [end.at - killedAt] : []
        })
        expect(movedEnds.length).toBeGreaterThan(0)
        expect(Math.max(...movedEnds)).toBeLessThan(failoverMs + 6_000)
      }).pipe(Effect.provide(client))
    }), { timeout: 90_000 })

  it.scopedLive("sub-goals: a worker SIGKILLed while sub-goals run; each tree finishes on the others, no sub-goal made twice, no call run twice", () =>
    Effect.gen(function*() {
      const failoverMs = 4_000
      const trees = 20
      const { client, ledger, url, workers } = yield* cluster(3, failoverMs, 300)
      yield* Effect.gen(function*() {
        const roots = yield* Effect.forEach(
          Array.from({ length: trees }, (_, i) => i + 1),
          (i) => Workers.submit({ goal: `(tree) delegate the ledger (${i})`, goalId: `tree-${i}`, options: { maxIterations: 20 } })
        ).pipe(Effect.provide(delegating))
        // Kill the first worker seen writing the ledger: a sub-goal's call, in its parent's drive.
        const first = yield* firstLine(ledger)
        const victim = workers.find((w) => w.name === first.worker)
        if (victim === undefined) return expect.unreachable()
        yield* victim.kill("SIGKILL")
        const killedAt = Date.now()
        expect((yield* victim.exit).signal).toBe("SIGKILL")
        yield* allEnded(roots, 60_000, workers)
        const children = roots.map((id) => `${id}.1`)
        const { lines, logs } = yield* checkAll([...roots, ...children], ledger)
        // Each tree: one sub-goal, linked both ways.
        const store = yield* StateStore.StateStore
        for (const root of roots) {
          expect((yield* store.goals({ parent: root })).map((g) => g.goalId)).toEqual([`${root}.1`])
          expect(logs.get(`${root}.1`)?.[0]).toMatchObject({ parent: { goalId: root, callId: `${root}:1`, depth: 1 } })
          expect(logs.get(root)?.filter((e) => e._tag === "ToolSucceeded")).toMatchObject([{ output: { child: `${root}.1`, reason: "done" } }])
        }
        // Each sub-goal made its two calls of `append`. One the kill cut between its ToolStarted and
        // its outcome is recorded unknown and never run again (it may or may not have written its
        // line before the kill); every other one wrote its line once.
        const appends = children.flatMap((id) => (logs.get(id) ?? []).flatMap((e) => (e._tag === "ToolStarted" && e.tool === "append" ? [e.callId] : [])))
        expect(appends).toHaveLength(2 * trees)
        const unknown = new Set(children.flatMap((id) =>
          (logs.get(id) ?? []).flatMap((e) => (e._tag === "ToolFailed" && e.tool === "append" && e.error.kind === "unknown" ? [e.callId] : []))
        ))
        for (const callId of appends) {
          const written = lines.filter((l) => l.callId === callId).length
          if (unknown.has(callId)) expect(written, callId).toBeLessThanOrEqual(1)
          else expect(written, callId).toBe(1)
        }
        // The sub-goals the victim was running ended after it died: on another worker, in their parent's next drive.
        const moved = children.filter((id) => lines.some((l) => l.goalId === id && l.worker === victim.name)).filter((id) =>
          (logs.get(id) ?? []).some((e) => e._tag === "Terminated" && e.at > killedAt)
        )
        expect(moved.length, `victim ${victim.name}; ${url}`).toBeGreaterThan(0)
      }).pipe(Effect.provide(client))
    }), { timeout: 120_000 })
})
