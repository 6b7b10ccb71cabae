import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import Sqlite from "better-sqlite3"
import { Chunk, Clock, Context, Deferred, Effect, Either, Fiber, HashMap, Layer, List, Logger, Option, Schema, Stream } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Control, Event, Goal, GoalSummary, LanguageModel, Replay, Runner, State, StateStore, ToolRegistry } from "@rx/kernel"
import { StoreConformance } from "@rx/kernel/testing"
import { Migrations, SqliteStore } from "@rx/store-sqlite"
import { contiguous, echo, echoRun, endsOnce, submitted } from "./fixtures.js"
import { exec, layerWithClient, tempDb, tempDir } from "./helpers.js"

const loadAll = (goalId: string) => Effect.flatMap(StateStore.StateStore, (store) => store.load(goalId))

/** A logger that keeps what it is given: the message, annotations and log span labels. */
const capture = () => {
  const lines: Array<{ readonly message: unknown; readonly annotations: Record<string, unknown>; readonly spans: ReadonlyArray<string> }> = []
  const logger = Logger.make(({ annotations, message, spans }) => {
    lines.push({
      message: Array.isArray(message) && message.length === 1 ? message[0] : message,
      annotations: Object.fromEntries(HashMap.toEntries(annotations)),
      spans: List.toArray(spans).map((span) => span.label)
    })
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

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

  it.scoped("why an open goal waits and where a fork comes from are in its summary; a database of schema 4 has them filled from the logs, read-only as it is and by the migrations", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const tools = ToolRegistry.layer([echo])
      const down = () => Effect.fail(new LanguageModel.ModelError({ message: "connection refused", status: 503 }))
      const runs = [
        // Waits for a person: the echo call needs approval, and no one is asked.
        Runner.run({ goal: "ask", goalId: "ask", options: { approval: { echo: "ask" } } }).pipe(Effect.provide(LanguageModel.layerScripted([LanguageModel.callTool("echo", { text: "hi" })]))),
        // Waits for the model, after one call; then its options change, and it still waits.
        Effect.zipLeft(
          Runner.run({ goal: "down", goalId: "down" }).pipe(Effect.provide(LanguageModel.layerScripted([LanguageModel.callTool("echo", { text: "a" }), down]))),
          Control.changeOptions("down", (o) => ({ ...o, maxIterations: 9 }))
        ),
        // Waited for the model, then was cancelled: nothing waits once it ended.
        Effect.zipLeft(
          Runner.run({ goal: "ended", goalId: "ended" }).pipe(Effect.provide(LanguageModel.layerScripted([down]))),
          Effect.zipRight(Control.cancel("ended"), Runner.resume("ended").pipe(Effect.provide(LanguageModel.layerScripted([]))))
        )
      ]
      // A fork of "ended" at its step 1, as `rx fork` records it.
      const forked = Effect.flatMap(StateStore.StateStore, (store) =>
        store.append("fork", 0, StoreConformance.sampleLog("fork", 9_000).map((e) => (e._tag === "GoalSubmitted" ? { ...e, forkedFrom: { goalId: "ended", iteration: 1 } } : e))))
      yield* Effect.forEach([...runs, forked], (run): Effect.Effect<unknown, unknown, StateStore.StateStore | ToolRegistry.ToolRegistry> => run, { discard: true }).pipe(Effect.provide(Layer.merge(Layer.fresh(SqliteStore.layer({ filename })), tools)))
      const expected = Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        return yield* Effect.forEach(["ask", "down", "ended", "fork"], (id) => Effect.map(store.load(id), (events) => GoalSummary.updateAll(undefined, events)))
      })
      const listed = Effect.flatMap(StateStore.StateStore, (store) => Effect.map(store.goals(), (all) => [...all].sort((a, b) => a.goalId.localeCompare(b.goalId))))
      const reading = Layer.fresh(SqliteStore.layer({ filename, readonly: true }))
      const summaries = yield* expected.pipe(Effect.provide(reading))
      expect(summaries.map((s) => [s?.goalId, s?.suspended?.reason ?? null, s?.approval?.tool ?? null, s?.forkedFrom ?? null])).toEqual([
        ["ask", "awaiting_approval", "echo", null],
        ["down", "model_unavailable", null, null],
        ["ended", null, null, null],
        ["fork", null, null, { goalId: "ended", iteration: 1 }]
      ])
      expect(yield* listed.pipe(Effect.provide(reading))).toEqual(summaries)
      const forksOf = (id: string, layer: Layer.Layer<StateStore.StateStore, unknown>) =>
        Effect.flatMap(StateStore.StateStore, (store) => Effect.map(store.goals({ forkedFrom: id }), (all) => all.map((g) => g.goalId))).pipe(Effect.provide(layer))
      expect(yield* forksOf("ended", reading)).toEqual(["fork"])

      // The same database as an rx of schema 6 left it (forks recorded, no column for them), then of schema 4.
      const downgrade = (statements: string) => {
        const sqlite = new Sqlite(filename)
        sqlite.exec(statements)
        sqlite.close()
      }
      downgrade("DROP INDEX goals_forked_from; ALTER TABLE goals DROP COLUMN forked_from; DELETE FROM rx_migrations WHERE migration_id >= 7")
      const readOnly = () => Layer.fresh(SqliteStore.layer({ filename, readonly: true }))
      expect(yield* listed.pipe(Effect.provide(readOnly()))).toEqual(summaries)
      expect(yield* forksOf("ended", readOnly())).toEqual(["fork"])
      expect(yield* forksOf("ask", readOnly())).toEqual([])
      downgrade("DROP INDEX goals_parent; ALTER TABLE goals DROP COLUMN parent; ALTER TABLE goals DROP COLUMN suspended; ALTER TABLE goals DROP COLUMN approval; DELETE FROM rx_migrations WHERE migration_id >= 5")
      expect(yield* listed.pipe(Effect.provide(readOnly()))).toEqual(summaries)
      expect(yield* listed.pipe(Effect.provide(Layer.fresh(SqliteStore.layer({ filename }))))).toEqual(summaries)
      expect(yield* listed.pipe(Effect.provide(reading))).toEqual(summaries)
      expect(yield* forksOf("ended", readOnly())).toEqual(["fork"])
      expect(yield* exec("SELECT max(migration_id) AS id FROM rx_migrations").pipe(Effect.provide(Layer.fresh(layerWithClient({ filename }))))).toEqual([{ id: Migrations.latest }])
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
        expect(bad).toMatchObject({ _tag: "@rx/kernel/StoreError", goalId: "g", seq: 2 })
        expect(bad.message).toContain("goal g, seq 2")
        // Rows with no checksum (as older rx wrote them) are decoded all the same.
        yield* exec("UPDATE events SET payload = (SELECT payload FROM events WHERE goal_id = 'g' AND seq = 1), version = 99, checksum = NULL WHERE goal_id = 'g' AND seq = 2")
        expect((yield* Effect.flip(store.load("g", 1))).message).toContain("version 99")
        yield* exec("DELETE FROM events WHERE goal_id = 'g' AND seq = 2")
        const gap = yield* Effect.flip(store.load("g"))
        expect([gap.seq, gap.message.includes("no event at this seq")]).toEqual([2, true])
        // Loading across the gap fails too: nothing is skipped.
        expect((yield* store.load("g", 0).pipe(Effect.either, Effect.map(Either.isLeft)))).toBe(true)
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("every row names its payload format (2, slim) and the decoder goes by it: a payload unlike its format is a StoreError naming goal and seq", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      yield* Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        const log = StoreConformance.sampleLog("g")
        yield* store.append("g", 0, log.slice(0, 2))
        yield* store.append("g", 2, log.slice(2))
        const rows = (yield* exec("SELECT format, payload FROM events WHERE goal_id = 'g' ORDER BY seq")) as ReadonlyArray<{ format: number; payload: string }>
        expect(rows.map((row) => row.format)).toEqual(log.map(() => 2))
        for (const row of rows) expect(Object.keys(JSON.parse(row.payload)).filter((k) => ["_tag", "goalId", "seq"].includes(k))).toEqual([])
        const slim = (rows[3]?.payload ?? "").replaceAll("'", "''")
        const full = (event: Event.Event) => Event.encodeJson(event).replaceAll("'", "''")
        // Rows marked by hand, as the README says, with no checksum (as older rx wrote them).
        const set = (format: number, payload: string) => exec(`UPDATE events SET format = ${format}, payload = '${payload}', checksum = NULL WHERE goal_id = 'g' AND seq = 3`)
        const refused = Effect.flatMap(Effect.flip(store.load("g")), (error) =>
          Effect.sync(() => {
            expect(error).toMatchObject({ _tag: "@rx/kernel/StoreError", goalId: "g", seq: 3 })
            return error.message
          }))

        // A full payload marked full (format 1) reads as the same event.
        yield* set(1, full(log[3] as Event.Event))
        expect(yield* store.load("g")).toEqual(log)
        // The same full payload marked slim is refused, not read as the event it holds.
        yield* set(2, full(log[3] as Event.Event))
        expect(yield* refused).toContain("says its payload is slim (format 2), but the payload holds _tag, goalId or seq")
        // A slim payload marked full is refused.
        yield* set(1, slim)
        expect(yield* refused).toContain("says its payload is full (format 1), but the payload lacks _tag, goalId or seq")
        // A format this rx does not know.
        yield* set(7, slim)
        expect(yield* refused).toContain("payload format 7, which this rx does not know")
        // A full payload naming another seq, or another kind of event than its row.
        yield* set(1, full({ ...(log[3] as Event.Event), seq: 9 }))
        expect(yield* refused).toContain("says goal g, seq 9")
        yield* set(1, full({ ...(log[2] as Event.Event), seq: 3 }))
        expect(yield* refused).toContain("the row is a ToolSucceeded, but its payload is a ToolStarted")
        // The tagged reads of `changes` go by the format too.
        const tagged = yield* Effect.flip(Stream.runCollect(Stream.take(store.changes("g", 0, ["ToolSucceeded"]), 1)))
        expect(tagged).toMatchObject({ _tag: "@rx/kernel/StoreError", goalId: "g", seq: 3 })
        yield* set(2, slim)
        expect(yield* store.load("g")).toEqual(log)
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
      expect(missing._tag).toBe("@rx/kernel/StoreError")
      const badConfig = yield* Effect.flip(Layer.build(SqliteStore.layer({ filename: newer, snapshotEvery: 0 })))
      expect(badConfig.message).toContain("snapshotEvery")
    }))

  it.scoped("snapshots: the runner's State, saved every N events and used by restore; ignored when of another version or corrupt", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const config = { filename, snapshotEvery: 5 }
      const result = yield* Runner.run({ goal: "echo", goalId: "g" }).pipe(
        Effect.provide(Layer.merge(SqliteStore.layer(config), echoRun(6)))
      )
      expect(result.reason).toBe("done")
      const logs = capture()
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
        expect(yield* Goal.restore("g")).toEqual(State.fromEvents("g", events))
        // A snapshot of another State version is ignored: restore folds from the start.
        yield* exec(`UPDATE snapshots SET state_version = ${State.version + 1}`)
        expect(Option.isNone(yield* store.snapshot("g"))).toBe(true)
        expect(yield* Goal.restore("g")).toEqual(State.fromEvents("g", events))
        expect(logs.lines).toEqual([])
        // A corrupt snapshot is ignored too, with a warning.
        yield* exec(`UPDATE snapshots SET state_version = ${State.version}, state = '{"goalId": 1}'`)
        expect(Option.isNone(yield* store.snapshot("g"))).toBe(true)
        expect(yield* Goal.restore("g")).toEqual(State.fromEvents("g", events))
        expect(logs.lines.map((line) => line.message)).toEqual([
          expect.stringContaining("goal g: its snapshot at seq"),
          expect.stringContaining("goal g: its snapshot at seq")
        ])
      }).pipe(Effect.provide(layerWithClient(config)), Effect.provide(logs.layer))
    }))

  it.scoped("the store folds nothing: a snapshot is the very State handed with the batch that crossed N events; appends without one save none", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const log = StoreConformance.sampleLog("f")
      // No fold of the events gives these States: the goal text marks each as the one handed over.
      const handed = (upTo: number): State.State => ({ ...State.fromEvents("f", log.slice(0, upTo)), goal: `handed at ${upTo}` })
      const logs = capture()
      yield* Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        const snapshotRow = Effect.map(exec("SELECT seq, state_version, state FROM snapshots WHERE goal_id = 'f'"), (rows) => rows[0])
        yield* store.append("f", 0, log.slice(0, 2), handed(2))
        expect(yield* store.snapshot("f")).toEqual(Option.none())
        // Crossing 3: the State handed is saved as it is, encoded by its Schema, with its version.
        yield* store.append("f", 2, log.slice(2, 4), handed(4))
        expect(yield* store.snapshot("f")).toEqual(Option.some({ seq: 4, state: handed(4) }))
        expect(yield* snapshotRow).toEqual({
          seq: 4,
          state_version: State.version,
          state: Schema.encodeSync(Schema.parseJson(State.State))(handed(4))
        })
        // Crossing 6 with no State handed (an append from outside the runner): nothing saved.
        yield* store.append("f", 4, log.slice(4))
        expect(Option.map(yield* store.snapshot("f"), (s) => s.seq)).toEqual(Option.some(4))
        // A State that is not the goal's after the batch is not saved; the append goes on.
        const other = [submitted("o"), ...StoreConformance.sampleLog("o").slice(1)]
        yield* store.append("o", 0, other.slice(0, 3), handed(3))
        expect(yield* store.snapshot("o")).toEqual(Option.none())
        expect((yield* store.load("o")).length).toBe(3)
        expect(logs.lines.map((line) => line.message)).toEqual([
          "goal o: the State handed with the events up to seq 3 is goal f's at seq 3; no snapshot is saved"
        ])
        // Restore starts from the State handed over, then folds the events after it.
        expect((yield* Goal.restore("f")).goal).toBe("handed at 4")
      }).pipe(Effect.provide(layerWithClient({ filename, snapshotEvery: 3 })), Effect.provide(logs.layer))
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
      expect(conflict).toMatchObject({ _tag: "@rx/kernel/AppendConflict", goalId: "s", expectedSeq: 2, actualSeq: 3 })
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

  it.scopedLive("changes gets this store's appends without reading them, and reads the log when another connection wrote first", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      // The follower's store polls rarely: only its own appends wake it in this test.
      const mine = yield* Layer.build(SqliteStore.layer({ filename, pollIntervalMs: 60_000 }))
      const other = yield* Layer.build(SqliteStore.layer({ filename, pollIntervalMs: 60_000 }))
      const log = StoreConformance.sampleLog("h")
      const append = (layer: typeof mine, from: number, to?: number) =>
        Effect.flatMap(StateStore.StateStore, (s) => s.append("h", from, log.slice(from, to))).pipe(Effect.provide(layer))
      yield* append(mine, 0, 1)
      const seen = yield* Effect.flatMap(StateStore.StateStore, (s) => Stream.runCollect(Stream.take(s.changes("h", 1), 5))).pipe(
        Effect.provide(mine),
        Effect.fork
      )
      yield* Effect.sleep("30 millis")
      yield* append(mine, 1, 2)
      yield* Effect.sleep("30 millis")
      // Seqs 2 and 3 come through the other connection, unseen here; this store's append of 4 and 5
      // then starts past the follower's cursor, so it reads 2 and 3 from the log before 4 and 5.
      yield* append(other, 2, 4)
      yield* append(mine, 4)
      const events = Chunk.toReadonlyArray(yield* Fiber.join(seen).pipe(Effect.timeout("10 seconds")))
      expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5])
      expect(events).toEqual(log.slice(1, 6))
    }))

  it.scopedLive("a follower of some kinds is handed only those, past batches it wanted nothing of, another connection's append and another goal's", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      // Rare polls: only gaps in this store's own appends tell the followers of the other connection's.
      const mine = yield* Layer.build(SqliteStore.layer({ filename, pollIntervalMs: 60_000 }))
      const other = yield* Layer.build(SqliteStore.layer({ filename, pollIntervalMs: 60_000 }))
      // Two iterations: seqs 0-4 as in the sample log, 5-8 the second iteration, 9 Terminated.
      const [submittedEvent, responded, started, succeeded, completed, terminated] = StoreConformance.sampleLog("k")
      const log: ReadonlyArray<Event.Event> = [submittedEvent, responded, started, succeeded, completed]
        .concat([responded, started, succeeded, completed].flatMap((e) => (e === undefined ? [] : [{ ...e, seq: e.seq + 4, iteration: 2 }])))
        .concat(terminated === undefined ? [] : [{ ...terminated, seq: 9, iteration: 2 }])
        .flatMap((e) => (e === undefined ? [] : [e]))
      expect(log.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
      const append = (layer: typeof mine, from: number) =>
        Effect.flatMap(StateStore.StateStore, (s) => s.append("k", from, log.slice(from, from + 1))).pipe(Effect.provide(layer))
      yield* append(mine, 0)
      const followed = (tags?: ReadonlyArray<Event.Event["_tag"]>) =>
        Effect.flatMap(StateStore.StateStore, (s) =>
          Effect.scoped(Effect.flatMap(StateStore.follow(s, "k", 1, tags), (next) => {
            const seen: Array<Event.Event> = []
            return Effect.as(Effect.repeat(Effect.tap(next, (events) => Effect.sync(() => seen.push(...events))), { until: () => seen.at(-1)?._tag === "Terminated" }), seen)
          }))).pipe(Effect.provide(mine), Effect.timeout("10 seconds"), Effect.fork)
      const tagged = yield* followed(["ToolSucceeded", "Terminated"])
      const all = yield* followed()
      yield* Effect.sleep("30 millis")
      // 1 and 2 hold nothing the tagged follower wants; another goal's append comes between.
      yield* append(mine, 1)
      yield* append(mine, 2)
      yield* Effect.flatMap(StateStore.StateStore, (s) => s.append("noise", 0, [submitted("noise")])).pipe(Effect.provide(mine))
      yield* append(mine, 3)
      yield* Effect.sleep("30 millis")
      // 5 through the other connection, between 4 and 6 (which hold nothing wanted either) from this one.
      yield* append(mine, 4)
      yield* append(other, 5)
      for (const seq of [6, 7, 8, 9]) yield* append(mine, seq)
      const taggedSeen = yield* Fiber.join(tagged)
      expect(taggedSeen.map((e) => [e.seq, e._tag])).toEqual([[3, "ToolSucceeded"], [7, "ToolSucceeded"], [9, "Terminated"]])
      expect(yield* Fiber.join(all)).toEqual(log.slice(1))
    }))

  it.scopedLive("a commit by another connection right after the first follower's first read wakes it", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const store = (layer: Layer.Layer<StateStore.StateStore, unknown>) => Effect.map(Layer.build(layer), Context.get(StateStore.StateStore))
      const mine = yield* store(SqliteStore.layer({ filename, pollIntervalMs: 20 }))
      const other = yield* store(SqliteStore.layer({ filename, pollIntervalMs: 20 }))
      const log = StoreConformance.sampleLog("w")
      yield* mine.append("w", 0, log.slice(0, 1))
      const next = yield* StateStore.follow(mine, "w", 0)
      expect(Chunk.toReadonlyArray(yield* next).map((e) => e.seq)).toEqual([0])
      // At once, with no yield in between: before a store's poller had run its first read.
      Effect.runSync(other.append("w", 1, log.slice(1, 2)))
      const woken = yield* next.pipe(Effect.timeout("30 seconds"), Effect.either)
      expect(Either.map(woken, (events) => Chunk.toReadonlyArray(events).map((e) => e.seq))).toEqual(Either.right([1]))
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
      expect(outcomes).toEqual(["@rx/kernel/GoalBusy", "done"])
      const busy = [a, b].find(Either.isLeft)
      if (busy !== undefined && Either.isLeft(busy)) expect(busy.left.message).toContain("is being run elsewhere")
      const events = yield* Effect.provide(loadAll("race"), first)
      expect(contiguous(events) && endsOnce(events)).toBe(true)
      expect((yield* Replay.verify(events)).reason).toBe("done")
    }))

  it.scopedLive("appends from many fibers at once: one wins each seq, the others get AppendConflict; every log stays whole", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const store = yield* Effect.provide(StateStore.StateStore, yield* Layer.build(SqliteStore.layer({ filename, synchronous: "NORMAL" })))
      yield* store.append("race", 0, [submitted("race")])
      const cancel = (i: number): Event.Event => ({ _tag: "CancelRequested", goalId: "race", seq: 1, iteration: 0, at: 2_000 + i, reason: `r${i}` })
      const outcomes = yield* Effect.all(
        Array.from({ length: 20 }, (_, i) => Effect.either(Effect.zipRight(Effect.yieldNow(), store.append("race", 1, [cancel(i)])))),
        { concurrency: "unbounded" }
      )
      expect(outcomes.filter(Either.isRight)).toHaveLength(1)
      expect(outcomes.filter(Either.isLeft).map((o) => Either.isLeft(o) && o.left._tag)).toEqual(Array.from({ length: 19 }, () => "@rx/kernel/AppendConflict"))
      expect((yield* store.load("race")).length).toBe(2)
      // Twenty goals appended event by event, all at once.
      const ids = Array.from({ length: 20 }, (_, i) => `many-${i}`)
      yield* Effect.forEach(ids, (goalId) => {
        const log = StoreConformance.sampleLog(goalId)
        return Effect.forEach(log, (event, seq) => Effect.zipRight(Effect.yieldNow(), store.append(goalId, seq, [event])), { discard: true })
      }, { concurrency: "unbounded", discard: true })
      for (const goalId of ids) {
        expect(yield* store.load(goalId)).toEqual(StoreConformance.sampleLog(goalId))
        expect(yield* store.goal(goalId)).toEqual(Option.some(GoalSummary.updateAll(undefined, StoreConformance.sampleLog(goalId))))
      }
    }))

  it.scoped("store operations run in the caller's fiber: a warning reaches the caller's logger with its annotations and log spans", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const logs = capture()
      yield* Effect.gen(function*() {
        const store = yield* StateStore.StateStore
        const log = StoreConformance.sampleLog("w")
        yield* store.append("w", 0, log, { ...State.fromEvents("w", log), goal: "handed" })
        yield* exec("UPDATE snapshots SET state = 'not json'")
        expect(yield* store.snapshot("w").pipe(Effect.annotateLogs("caller", "test"), Effect.withLogSpan("caller-span"))).toEqual(Option.none())
      }).pipe(Effect.provide(layerWithClient({ filename, snapshotEvery: 2 })), Effect.provide(logs.layer))
      expect(logs.lines).toHaveLength(1)
      expect(logs.lines[0]?.message).toContain("goal w: its snapshot at seq 6 is not usable")
      expect(logs.lines[0]?.annotations).toEqual({ caller: "test" })
      expect(logs.lines[0]?.spans).toEqual(["caller-span"])
    }))

  it.scopedLive("a transaction held through the store's client makes the store wait for it; one begun behind the client's back makes it fail clearly", () =>
    Effect.gen(function*() {
      const filename = yield* tempDb
      const context = yield* Layer.build(layerWithClient({ filename }))
      const store = Context.get(context, StateStore.StateStore)
      const sql = Context.get(context, SqlClient.SqlClient)
      const log = StoreConformance.sampleLog("t")
      yield* store.append("t", 0, log.slice(0, 1))
      // The client's transaction (BEGIN IMMEDIATE) stays open across a sleep; the append waits for its commit.
      const committed = yield* Deferred.make<number>()
      const held = yield* Effect.fork(sql.withTransaction(
        Effect.zipRight(Effect.sleep("100 millis"), Effect.flatMap(Clock.currentTimeMillis, (now) => Deferred.succeed(committed, now)))
      ))
      yield* Effect.sleep("20 millis")
      yield* store.append("t", 1, log.slice(1, 2))
      const appendedAt = yield* Clock.currentTimeMillis
      yield* Fiber.join(held)
      expect(appendedAt).toBeGreaterThanOrEqual(yield* Deferred.await(committed))
      // A transaction begun with a bare statement is not the client's: the store refuses to run inside it.
      yield* sql.unsafe("BEGIN")
      const refused = yield* Effect.flip(store.append("t", 2, log.slice(2, 3)))
      expect(refused._tag).toBe("@rx/kernel/StoreError")
      expect(refused.message).toContain("a transaction is open on the store's connection")
      yield* sql.unsafe("ROLLBACK")
      yield* store.append("t", 2, log.slice(2))
      expect(yield* store.load("t")).toEqual(log)
    }))
})
