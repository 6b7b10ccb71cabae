/**
 * Opening a Postgres store: migrations raced by many openers, refusals, configuration errors; what
 * it reads back (checksums, a batch of any size).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Either, Exit, Fiber, Layer, Schedule } from "effect"
import { type Event, GoalSummary, StateStore } from "@rx/kernel"
import { StoreConformance } from "@rx/kernel/testing"
import { Migrations, PgStore } from "@rx/store-pg"
import * as TestDatabase from "./database.js"

describe("opening a Postgres store", () => {
  layer(TestDatabase.layer, { excludeTestServices: true, timeout: "30 seconds" })((it) => {
    it.scoped("8 stores opening a new database at once: the schema is created once, and all of them work", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.fresh
        const stores = yield* Effect.all(Array.from({ length: 8 }, () => PgStore.make({ url, maxConnections: 2 })), {
          concurrency: "unbounded"
        })
        const log = StoreConformance.sampleLog("g-migrated")
        const writer = stores[3]
        expect(writer).toBeDefined()
        if (writer !== undefined) yield* writer.append("g-migrated", 0, log)
        for (const store of stores) expect((yield* store.load("g-migrated")).length).toBe(log.length)
        const sql = Context.get(yield* Layer.build(PgStore.layerWithClient({ url })), SqlClient.SqlClient)
        const applied = yield* sql<{ readonly migration_id: number }>`SELECT migration_id FROM rx_migrations ORDER BY migration_id`
        expect(applied.map((row) => row.migration_id)).toEqual(Object.keys(Migrations.migrations).map((key) => Number(key.slice(0, 4))))
      }), 60_000)

    it.scoped("a database of a newer rx's schema is refused, untouched", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.fresh
        const sql = Context.get(yield* Layer.build(PgStore.layerWithClient({ url })), SqlClient.SqlClient)
        const before = yield* sql`SELECT count(*)::int AS n FROM rx_events`
        yield* sql`INSERT INTO rx_migrations (migration_id, name) VALUES (${Migrations.latest + 1}, 'from_the_future')`
        const error = yield* Effect.flip(Effect.scoped(PgStore.make({ url })))
        expect(error).toMatchObject({ _tag: "@rx/store-pg/DatabaseRefused", reason: "newer" })
        expect(error.message).toContain("upgrade rx")
        expect(yield* sql`SELECT count(*)::int AS n FROM rx_events`).toEqual(before)
      }), 60_000)

    it.scoped("a database of schema 2 has why each open goal waits, and where a fork comes from, filled from its log by the migrations", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.fresh
        const base = { at: 1_000, iteration: 1 }
        const [submitted] = StoreConformance.sampleLog("w")
        const logs: ReadonlyArray<ReadonlyArray<Event.Event>> = ["ask", "down", "plain"].map((goalId) => [
          // "plain" is a fork, as `rx fork` records one: the migration that adds the column fills it.
          { ...(submitted as Event.Event), goalId, ...(goalId === "plain" ? { forkedFrom: { goalId: "ask", iteration: 1 } } : {}) },
          ...(goalId === "ask"
            ? [
              { ...base, goalId, _tag: "ApprovalRequested", seq: 1, callId: "ask:1", tool: "shell", input: { command: "ls" }, index: 0 },
              { ...base, goalId, _tag: "Suspended", seq: 2, reason: "awaiting_approval", detail: "waits" },
              { ...base, goalId, _tag: "CancelRequested", seq: 3, reason: "no" }
            ] satisfies ReadonlyArray<Event.Event>
            : goalId === "down"
            ? [
              { ...base, goalId, _tag: "ModelFailed", seq: 1, message: "refused", status: 503 },
              { ...base, goalId, _tag: "Suspended", seq: 2, reason: "model_unavailable", detail: "refused" }
            ] satisfies ReadonlyArray<Event.Event>
            : [])
        ])
        const ctx = yield* Layer.build(PgStore.layerWithClient({ url }))
        const store = Context.get(ctx, StateStore.StateStore)
        for (const log of logs) yield* store.append(log[0]?.goalId ?? "", 0, log)
        const expected = logs.map((log) => GoalSummary.updateAll(undefined, log))
        expect(expected.map((s) => [s?.suspended?.reason ?? null, s?.approval?.callId ?? null])).toEqual([
          ["awaiting_approval", null],
          ["model_unavailable", null],
          [null, null]
        ])
        const sql = Context.get(ctx, SqlClient.SqlClient)
        yield* sql`ALTER TABLE rx_goals DROP COLUMN suspended, DROP COLUMN approval, DROP COLUMN parent, DROP COLUMN forked_from`
        yield* sql`DELETE FROM rx_migrations WHERE migration_id >= 3`
        const migrated = yield* Effect.scoped(Effect.flatMap(PgStore.make({ url }), (s) => s.goals()))
        expect([...migrated].sort((a, b) => a.goalId.localeCompare(b.goalId))).toEqual(expected)
        expect(expected.map((s) => s?.forkedFrom ?? null)).toEqual([null, null, { goalId: "ask", iteration: 1 }])
        expect((yield* Effect.scoped(Effect.flatMap(PgStore.make({ url }), (s) => s.goals({ forkedFrom: "ask" })))).map((g) => g.goalId)).toEqual(["plain"])
      }), 60_000)

    it.scoped("a stored event that does not decode is an error naming goal and seq, never skipped", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.TestDatabase
        const ctx = yield* Layer.build(PgStore.layerWithClient({ url }))
        const store = Context.get(ctx, StateStore.StateStore)
        const sql = Context.get(ctx, SqlClient.SqlClient)
        const log = StoreConformance.sampleLog("g-corrupt")
        yield* store.append("g-corrupt", 0, log)
        yield* sql`UPDATE rx_events SET payload = '{"_tag":"ToolStarted"' WHERE goal_id = 'g-corrupt' AND seq = 2`
        const error = yield* Effect.flip(store.load("g-corrupt"))
        expect(error).toMatchObject({ _tag: "@rx/kernel/StoreError", goalId: "g-corrupt", seq: 2 })
        expect(error.message).toContain("goal g-corrupt, seq 2")
        expect((yield* store.load("g-corrupt", 3)).length).toBe(log.length - 3)
      }), 60_000)

    it.scoped("a byte changed in a stored payload that still decodes is refused by its checksum, naming goal and seq, on every read; a row without one reads as before", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.TestDatabase
        const ctx = yield* Layer.build(PgStore.layerWithClient({ url }))
        const store = Context.get(ctx, StateStore.StateStore)
        const sql = Context.get(ctx, SqlClient.SqlClient)
        const log = StoreConformance.sampleLog("g-flipped")
        yield* store.append("g-flipped", 0, log)
        // One bit of the goal's text: "say hi" becomes "say hI", still a GoalSubmitted that decodes.
        yield* sql`UPDATE rx_events SET payload = replace(payload, '"say hi"', '"say hI"') WHERE goal_id = 'g-flipped' AND seq = 0`
        for (const read of [store.load("g-flipped"), Effect.map(StateStore.first(store, "g-flipped", 0, ["GoalSubmitted"]), (e) => [e])]) {
          const result = yield* Effect.either(read)
          if (Either.isRight(result)) return expect.fail(`the changed event was read: ${JSON.stringify(result.right[0])}`)
          expect(result.left).toMatchObject({ _tag: "@rx/kernel/StoreError", goalId: "g-flipped", seq: 0 })
          expect(result.left.message).toContain("goal g-flipped, seq 0: its payload does not match the checksum rx stored with it")
        }
        // Rows an older rx wrote have no checksum: read as they are.
        yield* sql`UPDATE rx_events SET checksum = NULL WHERE goal_id = 'g-flipped' AND seq = 0`
        const [first] = yield* store.load("g-flipped")
        expect(first?._tag === "GoalSubmitted" && first.goal).toBe("say hI")
      }), 60_000)

    it.scoped("a batch of 70,000 events, past Postgres's 65,535 parameters a statement, is appended whole", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.TestDatabase
        const store = Context.get(yield* Layer.build(PgStore.layer({ url })), StateStore.StateStore)
        const [submitted] = StoreConformance.sampleLog("g-huge")
        if (submitted === undefined) return expect.fail("the sample log is empty")
        const batch: Array<Event.Event> = [submitted]
        for (let seq = 1; seq < 70_000; seq++) {
          batch.push({ _tag: "ActionRejected", goalId: "g-huge", seq, iteration: 1, at: 1_000, kind: "too_many_calls", reason: "past the cap", index: seq, raw: "{}" })
        }
        yield* store.append("g-huge", 0, batch)
        const loaded = yield* store.load("g-huge")
        expect([loaded.length, loaded[69_999]?.seq]).toEqual([70_000, 69_999])
      }), 120_000)

    it.scoped("a read interrupted while it waits for a pooled connection leaves the pool whole", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase.TestDatabase
        const ctx = yield* Layer.build(PgStore.layerWithClient({ url, maxConnections: 2, connectTimeoutMs: 3_000 }))
        const store = Context.get(ctx, StateStore.StateStore)
        const sql = Context.get(ctx, SqlClient.SqlClient)
        yield* store.append("g-pool", 0, StoreConformance.sampleLog("g-pool"))
        // Both connections busy for a second; two reads wait for them and are interrupted meanwhile.
        const busy = yield* Effect.fork(Effect.all([sql`SELECT pg_sleep(1)`, sql`SELECT pg_sleep(1)`], { concurrency: 2 }))
        yield* Effect.sleep("200 millis")
        const loading = yield* Effect.fork(store.load("g-pool"))
        const summary = yield* Effect.fork(store.goal("g-pool"))
        yield* Effect.sleep("200 millis")
        yield* Fiber.interrupt(loading)
        yield* Fiber.interrupt(summary)
        yield* Fiber.join(busy)
        // Had the interrupted reads kept the connections they were handed, these would time out.
        for (let i = 0; i < 4; i++) expect((yield* store.load("g-pool")).length).toBe(6)
      }).pipe(Effect.timeout("20 seconds")), 60_000)

    it.scoped("a stop while the database does not answer is not held by the connection attempt", () =>
      Effect.gen(function*() {
        const silent = yield* TestDatabase.silent
        const opening = yield* Effect.fork(Effect.scoped(PgStore.make({ url: silent.url, connectTimeoutMs: 600_000 })))
        yield* Effect.repeat(Effect.sync(silent.taken), { until: (n) => n > 0, schedule: Schedule.spaced("10 millis") })
        // Held, the interruption would wait out the connect timeout (ten minutes).
        const stopped = yield* Fiber.interrupt(opening).pipe(Effect.timeout("30 seconds"))
        expect(Exit.isInterrupted(stopped)).toBe(true)
      }), 60_000)

    it.scoped("bad configuration and an unreachable server are StoreErrors that say what to fix, never the password", () =>
      Effect.gen(function*() {
        const invalid = yield* Effect.either(Effect.scoped(PgStore.make({ url: "mysql://x", leaseTtlMs: 100, leaseRenewMs: 200 })))
        expect(Either.isLeft(invalid) && invalid.left.message).toMatch(/postgres:\/\/ .*connection URL/)
        const ttl = yield* Effect.either(Effect.scoped(PgStore.make({ url: "postgres://a@b/c", leaseTtlMs: 100, leaseRenewMs: 200 })))
        expect(Either.isLeft(ttl) && ttl.left.message).toContain("leaseTtlMs (100) must be greater than leaseRenewMs (200)")
        // Nothing listens on port 1.
        const unreachable = yield* Effect.either(
          Effect.scoped(PgStore.make({ url: "postgres://rx:secret@127.0.0.1:1/rx", connectTimeoutMs: 2_000 }))
        )
        expect(Either.isLeft(unreachable) && unreachable.left.message).toContain("127.0.0.1:1/rx")
        expect(Either.isLeft(unreachable) && unreachable.left.message).not.toContain("secret")
        const { url } = yield* TestDatabase.TestDatabase
        const wrong = new URL(url)
        wrong.password = "not-the-password"
        const refused = yield* Effect.either(Effect.scoped(PgStore.make({ url: wrong.toString() })))
        expect(Either.isLeft(refused) && refused.left.message).toContain("refused the login")
        expect(Either.isLeft(refused) && refused.left.message).not.toContain("not-the-password")
      }), 60_000)
  })
})
