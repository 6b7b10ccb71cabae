/**
 * The database rx 0.1 wrote (`packages/kernel/test/logs/v0.1/`, never modified: each test works on
 * a copy): read-only opens read it as it is, a writable open migrates it (the `format` column), and
 * it reads the same before and after, through the store and `Doctor`.
 */
import { describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Effect, Either, HashMap, Layer, Logger, LogLevel, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Event, GoalSummary, State, StateStore } from "@rx/kernel"
import { Doctor, Migrations, SqliteStore } from "@rx/store-sqlite"
import { exec, layerWithClient, tempDir } from "./helpers.js"

const folder = path.join(import.meta.dirname, "..", "..", "kernel", "test", "logs", "v0.1")

interface Manifest {
  readonly eventVersion: number
  readonly db: string
  readonly goals: ReadonlyArray<{ readonly name: string; readonly goalId: string; readonly events: number; readonly reason: string }>
}
const manifest = JSON.parse(fs.readFileSync(path.join(folder, "manifest.json"), "utf8")) as Manifest

/** The goal's log as rx 0.1 printed it, decoded from its encoding version. */
const golden = (name: string): ReadonlyArray<Event.Event> =>
  fs.readFileSync(path.join(folder, `${name}.jsonl`), "utf8").split("\n").filter((line) => line.trim() !== "").map((line) =>
    Either.getOrThrow(Event.decodeJson(line, manifest.eventVersion))
  )

/** A copy of the 0.1 database in a fresh temp folder. */
const copy = Effect.map(tempDir, (dir) => {
  const db = path.join(dir, manifest.db)
  fs.copyFileSync(path.join(folder, manifest.db), db)
  return db
})

/** Every goal loads as its golden log, and is listed with its status. */
const readsEveryGoal = Effect.gen(function*() {
  const store = yield* StateStore.StateStore
  for (const goal of manifest.goals) {
    const events = yield* store.load(goal.goalId)
    expect(events, goal.name).toEqual(golden(goal.name))
    expect(yield* store.goal(goal.goalId), goal.name).toEqual(Option.some(GoalSummary.updateAll(undefined, golden(goal.name))))
  }
  expect((yield* store.goals()).length).toBe(manifest.goals.length)
})

const schemaOf = (filename: string) => {
  const db = new Sqlite(filename, { readonly: true })
  const version = db.prepare(`SELECT max(migration_id) AS id FROM ${Migrations.table}`).get()
  const columns = db.prepare("SELECT name FROM pragma_table_info('events')").all()
  db.close()
  return { version, columns }
}

/** Doctor finds no problem (the recording left the open goal's lease behind: a warning). */
const healthy = (filename: string, appended = 0) =>
  Effect.map(Doctor.check(filename), (report) => {
    expect(report.findings.filter((finding) => finding.severity === "problem")).toEqual([])
    expect([report.healthy, report.goals, report.events]).toEqual([true, manifest.goals.length, manifest.goals.reduce((n, g) => n + g.events, appended)])
  })

describe("an rx 0.1 database", () => {
  it.scoped("is read as it is by read-only opens, migrated by a writable one, and reads the same after", () =>
    Effect.gen(function*() {
      const filename = yield* copy
      const before = fs.readFileSync(filename)
      expect(schemaOf(filename)).toMatchObject({ version: { id: 2 } })

      // Read-only (rx list, inspect, events, replay): no migration, every goal reads.
      yield* readsEveryGoal.pipe(Effect.provide(Layer.fresh(SqliteStore.layer({ filename, readonly: true }))))
      yield* healthy(filename)
      expect(fs.readFileSync(filename).equals(before)).toBe(true)

      // Writable (rx resume): migrated to the latest schema; the rows, slim as rx 0.1 wrote them, are format 2.
      const open = manifest.goals.find((goal) => goal.reason === "open")
      if (open === undefined) return expect.fail("the 0.1 recording has no open goal")
      yield* Effect.gen(function*() {
        yield* readsEveryGoal
        expect(yield* exec("SELECT DISTINCT format FROM events")).toEqual([{ format: 2 }])
        const store = yield* StateStore.StateStore
        const cancel: Event.Event = { _tag: "CancelRequested", goalId: open.goalId, seq: open.events, iteration: 0, at: 2_000, reason: "test" }
        yield* store.append(open.goalId, open.events, [cancel])
        expect(yield* exec(`SELECT format FROM events WHERE goal_id = '${open.goalId}' AND seq = ${open.events}`)).toEqual([{ format: 2 }])
      }).pipe(Effect.provide(Layer.fresh(layerWithClient({ filename }))))
      expect(schemaOf(filename)).toEqual({
        version: { id: Migrations.latest },
        columns: ["goal_id", "seq", "tag", "version", "payload", "format", "checksum"].map((name) => ({ name }))
      })

      // And read-only again, with the appended event.
      yield* Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        const events = yield* store.load(open.goalId)
        expect(events.slice(0, -1)).toEqual(golden(open.name))
        expect(events.at(-1)?._tag).toBe("CancelRequested")
        expect(Option.map(yield* store.goal(open.goalId), (s) => s.status)).toEqual(Option.some("open"))
        expect(State.fromEvents(open.goalId, events).cancelRequested).not.toBeNull()
        expect(yield* store.goal(open.goalId)).toEqual(Option.some(GoalSummary.updateAll(undefined, events)))
      }).pipe(Effect.provide(Layer.fresh(SqliteStore.layer({ filename, readonly: true }))))
      yield* healthy(filename, 1)
    }))

  it.scoped("the migration's transaction runs in the caller's fiber: the Migrator's logs, emitted while it holds the write lock, reach the caller's logger", () =>
    Effect.gen(function*() {
      const filename = yield* copy
      const lines: Array<{ readonly message: unknown; readonly annotations: Record<string, unknown>; readonly locked: boolean }> = []
      // Whether another connection is kept from writing at this moment (the migration's BEGIN IMMEDIATE holds the lock).
      const locked = () => {
        const other = new Sqlite(filename, { timeout: 0 })
        const busy = Either.isLeft(Either.try(() => other.exec("BEGIN IMMEDIATE")))
        if (!busy) other.exec("ROLLBACK")
        other.close()
        return busy
      }
      const logger = Logger.make(({ annotations, message }) => {
        lines.push({
          message: Array.isArray(message) && message.length === 1 ? message[0] : message,
          annotations: Object.fromEntries(HashMap.toEntries(annotations)),
          locked: locked()
        })
      })
      yield* Effect.scoped(Layer.build(SqliteStore.layer({ filename }))).pipe(
        Effect.annotateLogs("caller", "test"),
        Logger.withMinimumLogLevel(LogLevel.Debug),
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
      const running = lines.filter((line) => line.message === "Running migration")
      expect(running).toEqual([
        { message: "Running migration", annotations: { caller: "test", migration_id: "3", migration_name: "payload_format" }, locked: true },
        { message: "Running migration", annotations: { caller: "test", migration_id: "4", migration_name: "event_checksum" }, locked: true },
        { message: "Running migration", annotations: { caller: "test", migration_id: "5", migration_name: "goal_waiting" }, locked: true },
        { message: "Running migration", annotations: { caller: "test", migration_id: "6", migration_name: "goal_parent" }, locked: true },
        { message: "Running migration", annotations: { caller: "test", migration_id: "7", migration_name: "goal_fork" }, locked: true }
      ])
      expect(schemaOf(filename).version).toEqual({ id: Migrations.latest })
    }))
})
