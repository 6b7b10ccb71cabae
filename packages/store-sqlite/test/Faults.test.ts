/**
 * Disk full, a read-only database, and the `-wal` file deleted or replaced by another process
 * while a goal runs: a clear error, nothing half-recorded, and the goal resumes once the cause is
 * gone. SQLITE_FULL comes from `PRAGMA max_page_count` (and from a
 * real full tmpfs where this process may mount one); read-only from `PRAGMA query_only`, from
 * the store's `readonly` option, and from `chattr +i` where the filesystem supports it.
 */
import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Either, Layer, Schema } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Event, LanguageModel, Replay, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"
import { contiguous, endsOnce, submitted } from "./fixtures.js"
import { exec, layerWithClient, tempDb, tempDir } from "./helpers.js"

const big = (i: number) => `${i}:`.padEnd(6_000, "x")

/** The cause of a fault, switched on and off through the store's own connection. */
type Fault = (client: SqlClient.SqlClient) => Effect.Effect<void>

/** A tool with a large output; `during` runs inside the call (to fail the outcome's commit). */
const bigEcho = (during: (iteration: number) => Effect.Effect<void>) =>
  Tool.make({
    name: "big",
    description: "Echo a large text.",
    input: Schema.Struct({ text: Schema.String }),
    output: Schema.Struct({ text: Schema.String }),
    idempotent: true,
    execute: ({ text }, { callId }) =>
      Effect.as(during(Number(callId.slice(callId.lastIndexOf(":") + 1))), { text: text.toUpperCase() })
  })

/** Six big calls then done; the n-th answer follows from the answers already in the prompt. */
const model = (before: (iteration: number) => Effect.Effect<void>) =>
  Layer.succeed(
    LanguageModel.LanguageModel,
    LanguageModel.LanguageModel.of({
      generate: (request) => {
        const answered = request.messages.filter((m) => m.role === "assistant").length
        return Effect.as(
          before(answered + 1),
          answered < 6 ? LanguageModel.callTool("big", { text: big(answered) }) : LanguageModel.done("all big")
        )
      }
    })
  )

const services = (beforeAnswer: (i: number) => Effect.Effect<void>, duringCall: (i: number) => Effect.Effect<void>) =>
  Layer.merge(ToolRegistry.layer([bigEcho(duringCall)]), model(beforeAnswer))

const none = () => Effect.void

/** Each commit is a whole batch: the log ends after GoalSubmitted, ToolStarted or IterationCompleted. */
const atBoundary = (events: ReadonlyArray<Event.Event>) =>
  ["GoalSubmitted", "ToolStarted", "IterationCompleted", "Terminated"].includes(events[events.length - 1]?._tag ?? "")

/** Run until the fault strikes, then lift it and resume; check the error and both logs. */
const faultThenResume = (options: {
  readonly store: Layer.Layer<StateStore.StateStore | SqlClient.SqlClient, StateStore.StoreError | SqliteStore.DatabaseRefused>
  readonly inject: Fault
  readonly lift: Fault
  readonly where: "answer" | "call"
  readonly expected: string
}) =>
  Effect.gen(function*() {
    const client = yield* SqlClient.SqlClient
    const at = (i: number) => (i === 3 ? options.inject(client) : Effect.void)
    const failed = yield* Runner.run({ goal: "big", goalId: "g" }).pipe(
      Effect.provide(options.where === "answer" ? services(at, none) : services(none, at)),
      Effect.flip
    )
    expect(failed._tag).toBe("@rx/kernel/StoreError")
    expect(failed.message).toContain(options.expected)
    const store = yield* StateStore.StateStore
    const partial = yield* store.load("g")
    expect(contiguous(partial) && atBoundary(partial)).toBe(true)
    expect(partial.filter((e) => e._tag === "IterationCompleted")).toHaveLength(2)
    yield* options.lift(client)
    const result = yield* Runner.resume("g").pipe(Effect.provide(services(none, none)))
    expect(result.reason).toBe("done")
    const events = yield* store.load("g")
    expect(contiguous(events) && endsOnce(events)).toBe(true)
    expect(events.slice(0, partial.length)).toEqual(partial)
    expect((yield* Replay.verify(events)).reason).toBe("done")
  }).pipe(Effect.provide(options.store))

const pragma = (sql: string): Fault => (client) => Effect.orDie(client.unsafe(sql))

/** Cap the database at its current size: the next page it needs is SQLITE_FULL. */
const capAtCurrentSize = (client: SqlClient.SqlClient) =>
  Effect.orDie(Effect.gen(function*() {
    const rows = yield* client.unsafe<{ readonly page_count: number }>("PRAGMA page_count")
    yield* client.unsafe(`PRAGMA max_page_count = ${rows[0]?.page_count ?? 1}`)
  }))

const canRun = (command: string, args: ReadonlyArray<string>) => {
  try {
    execFileSync(command, args, { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

/** Whether this process may mount a tmpfs (root with CAP_SYS_ADMIN): for a real full disk. */
const probe = fs.mkdtempSync(path.join(os.tmpdir(), "rx-probe-"))
const canMount = canRun("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe]) && canRun("umount", [probe])
/** Whether files here can be made immutable (`chattr +i`, which stops even root from writing). */
const probeFile = path.join(probe, "f")
fs.writeFileSync(probeFile, "")
const canChattr = canRun("chattr", ["+i", probeFile]) && canRun("chattr", ["-i", probeFile])
fs.rmSync(probe, { recursive: true, force: true })

/** A small tmpfs, unmounted with the scope. */
const smallDisk = Effect.acquireRelease(
  Effect.map(tempDir, (dir) => {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", dir])
    return dir
  }),
  (dir) => Effect.sync(() => execFileSync("umount", [dir]))
)

/** Fill the disk holding `dir` with a file, until ENOSPC. */
const fill = (dir: string) =>
  Effect.sync(() => {
    const fd = fs.openSync(path.join(dir, "filler"), "w")
    const chunk = Buffer.alloc(4_096, 1)
    try {
      for (;;) fs.writeSync(fd, chunk)
    } catch {
      // The disk is full.
    } finally {
      fs.closeSync(fd)
    }
  })

describe("faults", () => {
  for (const where of ["answer", "call"] as const) {
    const batch = where === "answer" ? "call" : "outcome"
    it.scoped(`disk full (max_page_count) while committing the ${batch}`, () =>
      Effect.gen(function*() {
        const filename = yield* tempDb
        yield* faultThenResume({
          store: layerWithClient({ filename }),
          inject: capAtCurrentSize,
          lift: pragma("PRAGMA max_page_count = 1073741823"),
          where,
          expected: "the disk is full"
        })
      }))

    it.scoped(`read-only (query_only) while committing the ${batch}`, () =>
      Effect.gen(function*() {
        const filename = yield* tempDb
        yield* faultThenResume({
          store: layerWithClient({ filename }),
          inject: pragma("PRAGMA query_only = 1"),
          lift: pragma("PRAGMA query_only = 0"),
          where,
          expected: "is read-only"
        })
      }))
  }

  it.scoped.skipIf(!canMount)("a real full disk (a 1 MB tmpfs) while committing, then space is freed", () =>
    Effect.gen(function*() {
      const dir = yield* smallDisk
      yield* faultThenResume({
        store: layerWithClient({ filename: path.join(dir, "rx.db") }),
        inject: () => fill(dir),
        lift: () => Effect.sync(() => fs.rmSync(path.join(dir, "filler"))),
        where: "call",
        expected: "the disk is full"
      })
    }))

  it.scoped.skipIf(!canChattr)("an immutable database file (chattr +i): a clear error, nothing recorded, then it resumes", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const filename = path.join(dir, "rx.db")
      const stop = (i: number) => (i === 3 ? Effect.die("stop here") : Effect.void)
      yield* Runner.run({ goal: "big", goalId: "g" }).pipe(
        Effect.provide(Layer.merge(SqliteStore.layer({ filename }), services(stop, none))),
        Effect.exit
      )
      const files = [filename, `${filename}-wal`].filter((f) => fs.existsSync(f))
      yield* Effect.acquireRelease(
        Effect.sync(() => execFileSync("chattr", ["+i", ...files])),
        () => Effect.sync(() => execFileSync("chattr", ["-i", ...files]))
      )
      const writable = SqliteStore.layer({ filename })
      const load = Effect.flatMap(StateStore.StateStore, (s) => s.load("g")).pipe(Effect.provide(writable))
      const before = yield* load
      // SQLite opens a file it may not write read-only: reads work, the first append fails.
      const refused = yield* Runner.resume("g").pipe(Effect.provide(Layer.merge(writable, services(none, none))), Effect.flip)
      expect(refused.message).toContain("is read-only")
      expect(yield* load).toEqual(before)
      execFileSync("chattr", ["-i", ...files])
      const result = yield* Runner.resume("g").pipe(Effect.provide(Layer.merge(writable, services(none, none))))
      expect(result.reason).toBe("done")
      const events = yield* load
      expect(events.slice(0, before.length)).toEqual(before)
      expect(contiguous(events) && endsOnce(events)).toBe(true)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }))

  it.scoped("a store opened read-only reads, refuses appends clearly, and a writable one resumes", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const stop = (i: number) => (i === 3 ? Effect.die("stop here") : Effect.void)
      yield* Runner.run({ goal: "big", goalId: "g" }).pipe(
        Effect.provide(Layer.merge(SqliteStore.layer({ filename }), services(stop, none))),
        Effect.exit
      )
      const readonly = SqliteStore.layer({ filename, readonly: true })
      const before = yield* Effect.flatMap(StateStore.StateStore, (s) => s.load("g")).pipe(Effect.provide(readonly))
      expect(before.length).toBeGreaterThan(0)
      const refused = yield* Runner.resume("g").pipe(Effect.provide(Layer.merge(readonly, services(none, none))), Effect.flip)
      expect(refused.message).toContain("is read-only")
      const writable = SqliteStore.layer({ filename })
      const result = yield* Runner.resume("g").pipe(Effect.provide(Layer.merge(writable, services(none, none))))
      expect(result.reason).toBe("done")
      const events = yield* Effect.flatMap(StateStore.StateStore, (s) => s.load("g")).pipe(Effect.provide(writable))
      expect(events.slice(0, before.length)).toEqual(before)
      expect(contiguous(events) && endsOnce(events)).toBe(true)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }))

  it.scoped("read-only when a new goal is submitted: the advice is to run it again, never to resume a goal that was not recorded", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const store = layerWithClient({ filename })
      const outcome = yield* Effect.gen(function*() {
        yield* exec("PRAGMA query_only = 1")
        return yield* Effect.flip(Runner.submit({ goal: "never recorded", goalId: "fresh" }))
      }).pipe(Effect.provide(Layer.merge(store, services(none, none))))
      expect(outcome.message).toContain("is read-only")
      expect(outcome.message).toContain("then run it again (nothing of goal fresh was recorded)")
      expect(outcome.message).not.toContain("resume")
      const events = yield* Effect.flatMap(StateStore.StateStore, (s) => s.load("fresh")).pipe(Effect.provide(SqliteStore.layer({ filename })))
      expect(events).toEqual([])
    }))
})

describe("the -wal file removed by another process while a goal runs", () => {
  for (const how of ["deleted", "replaced"] as const) {
    it.scoped(`${how} during a call: the run stops with an error saying so, the store writes nothing more, and the goal resumes`, () =>
      Effect.gen(function*() {
        const filename = yield* tempDb
        const wal = `${filename}-wal`
        // During iteration 3's call, as `rm rx.db-wal` (or a copy moved over it) from another process would.
        const remove = (i: number) =>
          Effect.sync(() => {
            if (i !== 3) return
            if (how === "deleted") return fs.rmSync(wal)
            fs.copyFileSync(wal, `${wal}.copy`)
            fs.renameSync(`${wal}.copy`, wal)
          })
        const failed = yield* Effect.gen(function*() {
          const run = yield* Effect.either(Runner.run({ goal: "big", goalId: "g" }).pipe(Effect.provide(services(none, remove))))
          if (Either.isRight(run)) return yield* Effect.die(`the run went on to ${run.right.reason} with its -wal file ${how}`)
          // Nothing more is written through this store, for any goal.
          const store = yield* StateStore.StateStore
          const other = yield* Effect.flip(store.append("h", 0, [submitted("h")]))
          expect(other.message).toContain("goal h: nothing appended at seq 0: the log's -wal file")
          return run.left
        }).pipe(Effect.provide(SqliteStore.layer({ filename })))
        if (failed._tag !== "@rx/kernel/StoreError") return expect.fail(`the run failed with ${failed._tag}: ${failed.message}`)
        expect(failed.message).toContain(`the log's -wal file ${wal} was deleted or replaced by another process while rx had ${filename} open (it ${how === "deleted" ? "was deleted" : "was replaced by another file"}`)
        expect(failed.message).toContain(`the events of goal g after seq ${(failed.seq ?? 0) - 1} may be lost`)
        expect(failed.message).toContain("rx stops writing to this log")

        // This process was the log's only user, so closing it copied the deleted file's commits in:
        // the log ends with the batch the error was raised after (the call's outcome), and resumes.
        const writable = SqliteStore.layer({ filename })
        const load = (goalId: string) => Effect.flatMap(StateStore.StateStore, (s) => s.load(goalId)).pipe(Effect.provide(writable))
        const partial = yield* load("g")
        expect(contiguous(partial) && atBoundary(partial)).toBe(true)
        expect(partial.filter((e) => e._tag === "IterationCompleted")).toHaveLength(3)
        expect(partial.find((e) => e._tag === "ToolSucceeded" && e.iteration === 3)?.seq).toBe(failed.seq)
        expect(yield* load("h")).toEqual([])
        const result = yield* Runner.resume("g").pipe(Effect.provide(Layer.merge(writable, services(none, none))))
        expect(result.reason).toBe("done")
        const events = yield* load("g")
        expect(events.slice(0, partial.length)).toEqual(partial)
        expect(contiguous(events) && endsOnce(events)).toBe(true)
        expect((yield* Replay.verify(events)).reason).toBe("done")
      }))
  }

  it.scoped("through symbolic links to the log (SQLite keeps the -wal beside the file itself): a run raises nothing, and that -wal deleted is noticed", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      fs.mkdirSync(path.join(dir, "store"))
      yield* Effect.scoped(Layer.build(SqliteStore.layer({ filename: path.join(dir, "store", "rx.db") })))
      fs.symlinkSync(path.join(dir, "store"), path.join(dir, "via"))
      fs.symlinkSync("rx.db", path.join(dir, "store", "log.db"))
      const filename = path.join(dir, "via", "log.db")
      const wal = path.join(dir, "store", "rx.db-wal")
      const store = SqliteStore.layer({ filename })
      const result = yield* Runner.run({ goal: "big", goalId: "g" }).pipe(Effect.provide(Layer.merge(store, services(none, none))))
      expect(result.reason).toBe("done")
      expect(fs.readdirSync(path.join(dir, "store")).sort()).toEqual(["log.db", "rx.db"])
      const remove = (i: number) => (i === 3 ? Effect.sync(() => fs.rmSync(wal)) : Effect.void)
      const failed = yield* Runner.run({ goal: "big", goalId: "h" }).pipe(Effect.provide(Layer.merge(store, services(none, remove))), Effect.flip)
      expect(failed.message).toContain(`the log's -wal file ${wal} was deleted or replaced by another process`)
    }))
})
