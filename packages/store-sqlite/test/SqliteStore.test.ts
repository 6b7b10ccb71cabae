import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Fiber, Layer, Option, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Event, GoalSummary, Replay, Runner, State, StateStore, StoreConformance } from "@rx/kernel"
import { SqliteStore } from "@rx/store-sqlite"
import { contiguous, echoRun, endsOnce, submitted } from "./fixtures.js"
import { exec, layerWithClient, tempDb, tempDir } from "./helpers.js"

const loadAll = (goalId: string) => Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))

describe("SqliteStore", () => {
  it.scoped("runs a goal, and a new store on the file reads the same log, which replays", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const result = yield* Runner.run({ goal: "echo", goalId: "g1" }).pipe(
        Effect.provide(Layer.merge(SqliteStore.layer({ filename }), echoRun(3)))
      )
      expect(result.reason).toBe("done")
      const events = yield* loadAll("g1").pipe(Effect.provide(SqliteStore.layer({ filename, synchronous: "NORMAL" })))
      expect(contiguous(events) && endsOnce(events)).toBe(true)
      expect(events.filter((e) => e._tag === "IterationCompleted")).toHaveLength(4)
      const replayed = yield* Replay.verify(events)
      expect(replayed.reason).toBe("done")
      const summary = yield* Effect.flatMap(StateStore.StateStore, (s) => s.goal("g1")).pipe(
        Effect.provide(SqliteStore.layer({ filename, readonly: true }))
      )
      expect(Option.map(summary, (s) => [s.status, s.reason, s.nextSeq])).toEqual(Option.some(["terminated", "done", events.length]))
    }))

  it.scoped("a row that does not decode is a StoreError naming goal and seq; nothing is skipped", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const layer = layerWithClient({ filename })
      yield* Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        yield* store.append("g", 0, StoreConformance.sampleLog("g"))
        yield* exec("UPDATE events SET payload = '{\"_tag\":\"ToolStarted\"}' WHERE goal_id = 'g' AND seq = 2")
        const bad = yield* Effect.flip(store.load("g"))
        expect(bad).toMatchObject({ _tag: "StoreError", goalId: "g", seq: 2 })
        expect(bad.message).toContain("goal g, seq 2")
        yield* exec("UPDATE events SET payload = (SELECT payload FROM events WHERE goal_id = 'g' AND seq = 1), version = 99 WHERE goal_id = 'g' AND seq = 2")
        expect((yield* Effect.flip(store.load("g", 1))).message).toContain("version 99")
        yield* exec("DELETE FROM events WHERE goal_id = 'g' AND seq = 2")
        const gap = yield* Effect.flip(store.load("g"))
        expect([gap.seq, gap.message.includes("no event at this seq")]).toEqual([2, true])
        // Loading across the gap fails too: nothing is skipped.
        expect((yield* store.load("g", 0).pipe(Effect.either, Effect.map(Either.isLeft)))).toBe(true)
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("stores payloads without _tag, goalId and seq (the row holds them) and still reads full payloads", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      yield* Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        const log = StoreConformance.sampleLog("g")
        yield* store.append("g", 0, log)
        const rows = (yield* exec("SELECT payload FROM events WHERE goal_id = 'g' ORDER BY seq")) as ReadonlyArray<{ payload: string }>
        for (const row of rows) expect(Object.keys(JSON.parse(row.payload)).filter((k) => ["_tag", "goalId", "seq"].includes(k))).toEqual([])
        // A row written in the full format (goalId and seq in the payload) reads the same.
        const full = Event.encodeJson(log[3] as Event.Event)
        yield* exec(`UPDATE events SET payload = '${full.replaceAll("'", "''")}' WHERE goal_id = 'g' AND seq = 3`)
        const loaded = yield* store.load("g")
        expect(loaded).toEqual(log)
        // A full payload naming another seq than its row is refused.
        yield* exec(`UPDATE events SET payload = '${Event.encodeJson({ ...(log[3] as Event.Event), seq: 9 }).replaceAll("'", "''")}' WHERE goal_id = 'g' AND seq = 3`)
        expect((yield* Effect.flip(store.load("g"))).message).toContain("seq 9")
      }).pipe(Effect.provide(layerWithClient({ filename })))
    }))

  it.scoped("refuses a file that is not an rx database or has a newer schema, and leaves it untouched", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const garbage = path.join(dir, "notes.txt")
      fs.writeFileSync(garbage, "these are my notes, not a database ".repeat(200))
      const before = fs.readFileSync(garbage)
      const notDb = yield* Effect.flip(Layer.build(SqliteStore.layer({ filename: garbage })))
      expect(notDb.message).toContain("not a SQLite database")
      expect(fs.readFileSync(garbage).equals(before)).toBe(true)

      const other = path.join(dir, "other.db")
      yield* exec("CREATE TABLE todo (id INTEGER)").pipe(Effect.provide(SqliteStore.layerClient({ filename: other })))
      const notRx = yield* Effect.flip(Layer.build(SqliteStore.layer({ filename: other })))
      expect(notRx.message).toContain("not an rx log")

      const newer = path.join(dir, "newer.db")
      yield* Effect.provide(loadAll("x"), SqliteStore.layer({ filename: newer }))
      yield* exec("INSERT INTO rx_migrations (migration_id, name) VALUES (99, 'future')").pipe(
        Effect.provide(SqliteStore.layerClient({ filename: newer }))
      )
      const tooNew = yield* Effect.flip(Layer.build(SqliteStore.layer({ filename: newer })))
      expect(tooNew.message).toContain("newer rx")

      const missing = yield* Effect.flip(Layer.build(SqliteStore.layer({ filename: path.join(dir, "nope", "rx.db") })))
      expect(missing._tag).toBe("StoreError")
      const badConfig = yield* Effect.flip(Layer.build(SqliteStore.layer({ filename: newer, snapshotEvery: 0 })))
      expect(badConfig.message).toContain("snapshotEvery")
    }))

  it.scoped("snapshots: stored every N events, used by restore, rebuilt by another connection, ignored when stale", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const config = { filename, snapshotEvery: 5 }
      const result = yield* Runner.run({ goal: "echo", goalId: "g" }).pipe(
        Effect.provide(Layer.merge(SqliteStore.layer(config), echoRun(6)))
      )
      expect(result.reason).toBe("done")
      yield* Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        const events = yield* store.load("g")
        const snapshot = yield* store.snapshot("g")
        expect(Option.isSome(snapshot)).toBe(true)
        if (Option.isSome(snapshot)) {
          const { seq, state } = snapshot.value
          expect(seq).toBeGreaterThan(events.length - 6)
          expect(state).toEqual(State.fromEvents("g", events.slice(0, seq)))
        }
        expect(yield* Runner.restore("g")).toEqual(State.fromEvents("g", events))
        // A snapshot of another State version is ignored: restore folds from scratch.
        yield* exec(`UPDATE snapshots SET state_version = ${State.version + 1}`)
        expect(Option.isNone(yield* store.snapshot("g"))).toBe(true)
        expect(yield* Runner.restore("g")).toEqual(State.fromEvents("g", events))
        // A corrupt snapshot is ignored too.
        yield* exec(`UPDATE snapshots SET state_version = ${State.version}, state = '{"goalId": 1}'`)
        expect(Option.isNone(yield* store.snapshot("g"))).toBe(true)
      }).pipe(Effect.provide(layerWithClient(config)))

      // Two stores append alternately: each one's cache goes cold, and due snapshots are rebuilt.
      const a = yield* Layer.build(SqliteStore.layer(config))
      const b = yield* Layer.build(SqliteStore.layer(config))
      const log = [submitted("h"), ...StoreConformance.sampleLog("h").slice(1, 5)]
      const more = Array.from({ length: 12 }, (_, i): Event.Event => ({
        _tag: "CancelRequested", goalId: "h", seq: 5 + i, iteration: 1, at: 2_000 + i, reason: `r${i}`
      }))
      const all = [...log, ...more]
      for (let i = 0; i < all.length; i += 2) {
        const batch = all.slice(i, i + 2)
        yield* Effect.flatMap(StateStore.StateStore, (s) => s.append("h", i, batch)).pipe(Effect.provide(i % 4 === 0 ? a : b))
      }
      const snap = yield* Effect.flatMap(StateStore.StateStore, (s) => s.snapshot("h")).pipe(Effect.provide(a))
      expect(Option.map(snap, (s) => s.seq)).toEqual(Option.some(16))
      expect(Option.map(snap, (s) => s.state)).toEqual(Option.some(State.fromEvents("h", all.slice(0, 16))))
      // A snapshot of another State version is rebuilt at the next one due.
      yield* exec(`UPDATE snapshots SET state_version = ${State.version + 1} WHERE goal_id = 'h'`).pipe(
        Effect.provide(SqliteStore.layerClient(config))
      )
      const later = Array.from({ length: 4 }, (_, i): Event.Event => ({
        _tag: "CancelRequested", goalId: "h", seq: 17 + i, iteration: 1, at: 3_000 + i, reason: `later${i}`
      }))
      yield* Effect.flatMap(StateStore.StateStore, (s) => s.append("h", 17, later)).pipe(Effect.provide(b))
      const rebuilt = yield* Effect.flatMap(StateStore.StateStore, (s) => s.snapshot("h")).pipe(Effect.provide(a))
      expect(Option.map(rebuilt, (s) => s.state)).toEqual(Option.some(State.fromEvents("h", [...all, ...later])))
    }))

  it.scopedLive("a write lock held by another connection past the busy timeout is a clear error; nothing is appended", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const store = yield* Layer.build(SqliteStore.layer({ filename, busyTimeoutMs: 50 }))
      const other = yield* Layer.build(SqliteStore.layerClient({ filename }))
      const log = StoreConformance.sampleLog("b")
      const append = (from: number, to: number) =>
        Effect.flatMap(StateStore.StateStore, (s) => s.append("b", from, log.slice(from, to))).pipe(Effect.provide(store))
      yield* append(0, 2)
      yield* exec("BEGIN IMMEDIATE").pipe(Effect.provide(other))
      const locked = yield* Effect.flip(append(2, 4))
      expect(locked.message).toContain("is locked by another process")
      yield* exec("COMMIT").pipe(Effect.provide(other))
      expect((yield* Effect.provide(loadAll("b"), store)).length).toBe(2)
      yield* append(2, 4)
      expect((yield* Effect.provide(loadAll("b"), store)).length).toBe(4)
    }))

  it.scoped("an append after another connection's is a conflict at the real log end; the summary stays exact", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const a = yield* Layer.build(SqliteStore.layer({ filename }))
      const b = yield* Layer.build(SqliteStore.layer({ filename }))
      const log = StoreConformance.sampleLog("s")
      const append = (store: typeof a, from: number, to: number) =>
        Effect.flatMap(StateStore.StateStore, (s) => s.append("s", from, log.slice(from, to))).pipe(Effect.provide(store))
      // `a` knows the goal at seq 2; `b` appends behind its back.
      yield* append(a, 0, 1)
      yield* append(a, 1, 2)
      yield* append(b, 2, 3)
      const conflict = yield* Effect.flip(append(a, 2, 3))
      expect(conflict).toMatchObject({ _tag: "AppendConflict", goalId: "s", expectedSeq: 2, actualSeq: 3 })
      yield* append(a, 3, 4)
      yield* append(b, 4, log.length)
      const events = yield* Effect.provide(loadAll("s"), a)
      expect(events).toEqual(log)
      const summary = yield* Effect.flatMap(StateStore.StateStore, (s) => s.goal("s")).pipe(Effect.provide(a))
      expect(summary).toEqual(Option.some(GoalSummary.updateAll(undefined, log)))
    }))

  it.scopedLive("changes sees appends made through another connection", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const writer = yield* Layer.build(SqliteStore.layer({ filename }))
      const reader = yield* Layer.build(SqliteStore.layer({ filename, pollIntervalMs: 10 }))
      const log = StoreConformance.sampleLog("c")
      yield* Effect.flatMap(StateStore.StateStore, (s) => s.append("c", 0, log.slice(0, 2))).pipe(Effect.provide(writer))
      const seen = yield* Effect.flatMap(StateStore.StateStore, (s) =>
        Stream.runCollect(Stream.take(s.changes("c", 1, ["ModelResponded", "ToolSucceeded", "Terminated"]), 3))).pipe(
          Effect.provide(reader),
          Effect.fork
        )
      yield* Effect.sleep("30 millis")
      yield* Effect.flatMap(StateStore.StateStore, (s) =>
        Effect.zipRight(s.append("c", 2, log.slice(2, 4)), s.append("c", 4, log.slice(4)))).pipe(Effect.provide(writer))
      const events = Chunk.toReadonlyArray(yield* Fiber.join(seen).pipe(Effect.timeout("10 seconds")))
      expect(events.map((e) => [e.seq, e._tag])).toEqual([[1, "ModelResponded"], [3, "ToolSucceeded"], [5, "Terminated"]])
    }))

  it.scopedLive("two runners on one goal: exactly one proceeds, the other stops as busy; the log stays contiguous", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const first = yield* Layer.build(SqliteStore.layer({ filename }))
      const second = yield* Layer.build(SqliteStore.layer({ filename }))
      yield* Effect.flatMap(StateStore.StateStore, (s) => s.append("race", 0, [submitted("race")])).pipe(Effect.provide(first))
      const runner = (store: typeof first) =>
        Runner.resume("race").pipe(Effect.provide(echoRun(5, 5)), Effect.provide(store), Effect.either)
      const [a, b] = yield* Effect.all([runner(first), runner(second)], { concurrency: 2 })
      const outcomes = [a, b].map((r) => (Either.isRight(r) ? r.right.reason : r.left._tag)).sort()
      expect(outcomes).toEqual(["GoalBusy", "done"])
      const busy = [a, b].find(Either.isLeft)
      if (busy !== undefined && Either.isLeft(busy)) expect(busy.left.message).toContain("is being run elsewhere")
      const events = yield* Effect.provide(loadAll("race"), first)
      expect(contiguous(events) && endsOnce(events)).toBe(true)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }))
})
