/**
 * The SQLite `StateStore`: one `events` row per event (its Schema's JSON, with the encoding
 * version), a `goals` summary and a `snapshots` table kept in the same transaction. Each batch
 * is one `BEGIN IMMEDIATE` transaction that checks `expectedSeq` against the stored log end, so
 * two writers, in this process or another, can never both append at the same seq. A goal's
 * runner holds a row in `leases`, so a second runner stops before it touches the goal.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Chunk, Clock, Effect, Either, Layer, Option, PubSub, Queue, Schema, Stream } from "effect"
import { Event, GoalSummary, State, StateStore } from "@rx/kernel"
import * as Config from "./Config.js"
import { decodeRows, slimJson } from "./internal/codec.js"
import { DatabaseRefused, toStoreError } from "./internal/errors.js"
import { prepare } from "./internal/file.js"
import { decodeHolder, describeHolder, isAlive, newToken, processLeases, thisHost } from "./internal/lease.js"
import { atomically, connection, field, immediate, query } from "./internal/sql.js"
import * as Migrations from "./Migrations.js"

export { DatabaseRefused }

type Service = StateStore.StateStore["Type"]
type StoreError = StateStore.StoreError
const StoreError = StateStore.StoreError

/**
 * Open the database as an @effect/sql `SqliteClient`: the busy timeout and the `synchronous`
 * level. The journal is left as the file has it: `make` switches an rx log to WAL once it
 * knows the file is one, so opening another program's database never rewrites its header.
 * The connection closes with the Layer's scope.
 */
export const layerClient = (input: Config.Input): Layer.Layer<SqliteClient.SqliteClient, StoreError> =>
  Layer.scoped(
    SqliteClient.SqliteClient,
    Effect.gen(function*() {
      const config = yield* Config.decode(input)
      const where = { ...config, what: `opening ${config.filename}` }
      const client = yield* SqliteClient.make({
        filename: config.filename,
        readonly: config.readonly,
        disableWAL: true
      }).pipe(Effect.catchAllDefect((defect) => Effect.fail(toStoreError(where, defect))))
      yield* Effect.flatMap(connection(client), (conn) =>
        Effect.zipRight(
          query(conn, `PRAGMA busy_timeout = ${config.busyTimeoutMs}`),
          query(conn, `PRAGMA synchronous = ${config.synchronous}`)
        )).pipe(Effect.mapError((error) => toStoreError(where, error)))
      return client
    })
  ).pipe(Layer.provide(Reactivity.layer))

/**
 * SQLite's `quick_check` (the b-tree structure, records and freelist; not index contents): a
 * damaged file is refused before anything is written to it. Linear in the file's size: about
 * 12 ms for a log of 10,000 iterations (9.5 MB) with the file in the page cache.
 */
const quickCheck = (conn: Connection, config: Config.Config) =>
  Effect.gen(function*() {
    const rows = yield* query(conn, "PRAGMA quick_check(5)")
    const problems = rows.map((row) => String(field(row, "quick_check")))
    if (problems.length === 1 && problems[0] === "ok") return
    return yield* new DatabaseRefused({
      filename: config.filename,
      reason: "damaged",
      message: `${config.filename} is damaged: SQLite's quick_check found ${problems.length >= 5 ? "at least 5 problems" : `${problems.length} problem${problems.length === 1 ? "" : "s"}`} (${
        (problems[0] ?? "?").replace(/\s+/g, " ").slice(0, 300)
      }); rx will not write to a damaged log: restore it from a backup`
    })
  }).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(toStoreError({ ...config, what: `checking ${config.filename}` }, error))))

/**
 * The store over the `SqliteClient` in context (opened with the same config by `layerClient`).
 * A writable store first runs `quick_check` (unless `quickCheck: false`), then creates or
 * migrates the schema (a database without tables is initialised only with `create`), then
 * switches the file to WAL.
 */
export const make = (input: Config.Input): Effect.Effect<Service, StoreError | DatabaseRefused, SqliteClient.SqliteClient> =>
  makeWith(input, true)

const makeWith = (input: Config.Input, mayInitialise: boolean): Effect.Effect<Service, StoreError | DatabaseRefused, SqliteClient.SqliteClient> =>
  Effect.gen(function*() {
    const config = yield* Config.decode(input)
    const client = yield* SqliteClient.SqliteClient
    const conn = yield* connection(client).pipe(Effect.mapError((error) => toStoreError({ ...config, what: `opening ${config.filename}` }, error)))
    if (!config.readonly && config.quickCheck) yield* quickCheck(conn, config)
    yield* Migrations.run(client, { ...config, create: mayInitialise && config.create })
    // WAL: readers never block the writer, so other processes read while a run appends.
    if (!config.readonly) {
      yield* query(conn, "PRAGMA journal_mode = WAL").pipe(
        Effect.mapError((error) => toStoreError({ ...config, what: `opening ${config.filename}` }, error))
      )
    }
    const failed = (what: string, goalId?: string) => (error: SqlError) =>
      toStoreError({ ...config, what, goalId }, error)

    /** Goals appended to by this store, so `changes` in this process need not wait for a poll. */
    const appended = yield* PubSub.unbounded<string>()
    /**
     * What this store knows of each goal it appended to: the summary and, when known, the
     * folded State after its last append. Valid only while the log end is still `nextSeq`,
     * which each append checks in its transaction, so appends by others just make it stale.
     */
    const known = new Map<string, Known>()

    const append: Service["append"] = (goalId, expectedSeq, events) =>
      Effect.gen(function*() {
        const params: Array<unknown> = []
        for (const event of events) {
          const payload = Either.try({ try: () => slimJson(event), catch: (error) => String(error) })
          if (Either.isLeft(payload)) {
            return yield* new StoreError({
              message: `goal ${goalId}: ${event._tag} at seq ${event.seq} cannot be encoded as JSON (${payload.left})`,
              goalId,
              seq: event.seq
            })
          }
          params.push(goalId, event.seq, event._tag, Event.version, payload.right)
        }
        const next = yield* atomically(immediate(conn, appendIn(goalId, expectedSeq, events, params))).pipe(
          Effect.catchTag("SqlError", (error) => Effect.fail(failed(`appending to goal ${goalId} at seq ${expectedSeq}`, goalId)(error)))
        )
        known.delete(goalId)
        if (next !== undefined && next.summary.status === "open") {
          known.set(goalId, next)
          if (known.size > maxKnownGoals) {
            const oldest = known.keys().next()
            if (oldest.done !== true) known.delete(oldest.value)
          }
        }
        if (events.length > 0) yield* PubSub.publish(appended, goalId)
      })

    /** The append itself, inside the transaction: the goal's new summary and, when known, its folded State. */
    const appendIn = (
      goalId: string,
      expectedSeq: number,
      events: ReadonlyArray<Event.Event>,
      params: ReadonlyArray<unknown>
    ) =>
      Effect.gen(function*() {
        const cached = known.get(goalId)
        const fresh = cached !== undefined && cached.summary.nextSeq === expectedSeq ? cached : undefined
        if (fresh !== undefined && events.length > 0 && Option.isNone(StateStore.validateBatch(goalId, expectedSeq, events))) {
          // The common case, this store's own next append: the summary row, updated only if
          // it is still at `expectedSeq`, is the log-end check (it moves with every append).
          const summary = GoalSummary.updateAll(fresh.summary, events)
          if (summary !== undefined && summary.goal === fresh.summary.goal && summary.submittedAt === fresh.summary.submittedAt) {
            const updated = yield* conn.executeRaw(advanceGoalSql, [
              summary.status,
              summary.iterations,
              summary.nextSeq,
              summary.lastIteration,
              summary.reason,
              summary.updatedAt,
              goalId,
              expectedSeq
            ])
            if (field(updated, "changes") === 1) {
              yield* query(conn, insertSql(events.length), params)
              return { summary, state: yield* snapshotAfter(goalId, expectedSeq, fresh.state, events) }
            }
          }
        }
        // Otherwise check the log itself and read the summary row.
        const last = field((yield* query(conn, lastSeqSql, [goalId]))[0], "last")
        const actualSeq = typeof last === "number" ? last + 1 : 0
        if (actualSeq !== expectedSeq) return yield* new StateStore.AppendConflict({ goalId, expectedSeq, actualSeq })
        const invalid = StateStore.validateBatch(goalId, expectedSeq, events)
        if (Option.isSome(invalid)) return yield* invalid.value
        if (events.length === 0) return undefined
        let summary = fresh?.summary
        if (summary === undefined && expectedSeq > 0) {
          const rows = yield* query(conn, selectGoalSql, [goalId])
          summary = rows[0] === undefined ? undefined : yield* decodeSummary(rows[0])
        }
        summary = GoalSummary.updateAll(summary, events)
        yield* query(conn, insertSql(events.length), params)
        if (summary === undefined) return undefined
        yield* query(conn, upsertGoalSql, summaryParams(summary))
        const base = fresh?.state ?? (expectedSeq === 0 ? State.empty(goalId) : undefined)
        return { summary, state: yield* snapshotAfter(goalId, expectedSeq, base, events) }
      })

    /**
     * The State after `events` (appended at `expectedSeq`) when `base` is the State before them,
     * writing a snapshot when one is due (rebuilt from the last snapshot if `base` is unknown).
     */
    const snapshotAfter = (
      goalId: string,
      expectedSeq: number,
      base: State.State | undefined,
      events: ReadonlyArray<Event.Event>
    ): Effect.Effect<State.State | undefined, StoreError | SqlError> => {
      const folded = base === undefined ? undefined : State.fold(base, events)
      const end = expectedSeq + events.length
      if (Math.floor(end / config.snapshotEvery) <= Math.floor(expectedSeq / config.snapshotEvery)) return Effect.succeed(folded)
      return Effect.gen(function*() {
        const next = folded ?? State.fold(yield* rebuild(goalId, expectedSeq), events)
        const encoded = encodeState(next)
        if (Either.isRight(encoded)) {
          yield* query(conn, upsertSnapshotSql, [goalId, next.seq, State.version, encoded.right])
        }
        return next
      })
    }

    /** The State at `upTo` events: the latest usable snapshot, then the events after it. */
    const rebuild = (goalId: string, upTo: number) =>
      Effect.gen(function*() {
        const snapshot = yield* readSnapshot(conn, goalId)
        const base = Option.match(snapshot, {
          onNone: () => State.empty(goalId),
          onSome: (s) => (s.seq <= upTo ? s.state : State.empty(goalId))
        })
        return State.fold(base, yield* loadIn(goalId, base.seq, upTo))
      })

    /** Events `fromSeq <= seq < toSeq`, decoded and checked; a bad row fails naming its seq. */
    const loadIn = (goalId: string, fromSeq: number, toSeq?: number) =>
      Effect.flatMap(
        toSeq === undefined
          ? query(conn, selectEventsSql, [goalId, fromSeq])
          : query(conn, selectRangeSql, [goalId, fromSeq, toSeq]),
        (rows) => decodeRows(goalId, fromSeq, rows)
      )

    const load: Service["load"] = (goalId, fromSeq = 0) =>
      atomically(loadIn(goalId, fromSeq)).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(failed(`loading goal ${goalId}`, goalId)(error)))
      )

    /** Every event from `fromSeq`, and the seq after the last. */
    const loadAll = (goalId: string, fromSeq: number) =>
      Effect.map(load(goalId, fromSeq), (events) => ({ events, end: fromSeq + events.length }))

    /**
     * The events from `fromSeq` of the given kinds, and the seq after the log's last event; the
     * others are not even read (the runner's cancel watcher polls for one kind all run long).
     */
    const loadTagged = (goalId: string, fromSeq: number, tags: ReadonlyArray<string>) =>
      atomically(Effect.gen(function*() {
        const last = field((yield* query(conn, lastSeqSql, [goalId]))[0], "last")
        const end = typeof last === "number" ? last + 1 : 0
        if (end <= fromSeq || tags.length === 0) return { events: [], end: Math.max(end, fromSeq) }
        const rows = yield* query(
          conn,
          `SELECT seq, tag, version, payload FROM events WHERE goal_id = ? AND seq >= ? AND seq < ? AND tag IN (${
            tags.map(() => "?").join(", ")
          }) ORDER BY seq`,
          [goalId, fromSeq, end, ...tags]
        )
        return { events: yield* decodeRows(goalId, undefined, rows), end }
      })).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(failed(`loading goal ${goalId}`, goalId)(error)))
      )

    const goal: Service["goal"] = (goalId) =>
      atomically(query(conn, selectGoalSql, [goalId])).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(failed(`reading goal ${goalId}`, goalId)(error))),
        Effect.flatMap((rows) =>
          rows[0] === undefined ? Effect.succeed(Option.none()) : Effect.map(decodeSummary(rows[0]), Option.some)
        )
      )

    const goals: Service["goals"] = (q = {}) => {
      const where = q.status === undefined ? "" : " WHERE status = ?"
      const limit = q.limit === undefined ? "" : " LIMIT ?"
      const params = [...(q.status === undefined ? [] : [q.status]), ...(q.limit === undefined ? [] : [q.limit])]
      return atomically(query(conn, `SELECT * FROM goals${where} ORDER BY submitted_at DESC, goal_id DESC${limit}`, params)).pipe(
          Effect.catchTag("SqlError", (error) => Effect.fail(failed("listing goals")(error))),
          Effect.flatMap((rows) => Effect.forEach(rows, decodeSummary))
        )
    }

    const changes: Service["changes"] = (goalId, fromSeq, tags) =>
      Stream.unwrapScoped(
        Effect.gen(function*() {
          // Subscribe before the first read, so no append of this process falls in between.
          const wakeups = yield* PubSub.subscribe(appended)
          const wants = (event: Event.Event) => tags === undefined || tags.includes(event._tag)
          let cursor = fromSeq
          const next = Effect.gen(function*() {
            while (true) {
              const batch = yield* (tags === undefined ? loadAll(goalId, cursor) : loadTagged(goalId, cursor, tags))
              if (batch.end > cursor) {
                cursor = batch.end
                const wanted = batch.events.filter(wants)
                if (wanted.length > 0) return Chunk.unsafeFromArray(wanted)
                continue
              }
              // Nothing new: wait for an append here, or poll for one from another process.
              yield* Effect.raceFirst(Effect.sleep(config.pollIntervalMs), Queue.take(wakeups))
              yield* Queue.takeAll(wakeups)
            }
          })
          return Stream.repeatEffectChunk(next)
        })
      )

    const snapshot: Service["snapshot"] = (goalId) =>
      atomically(readSnapshot(conn, goalId)).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(failed(`reading the snapshot of goal ${goalId}`, goalId)(error)))
      )

    const where = (what: string, goalId: string) => ({ ...config, what, goalId })

    /**
     * Take the goal's lease in one `BEGIN IMMEDIATE` transaction: refuse it if a live holder has
     * it, otherwise (no row, or a dead holder's) write ours. Returns the lease's token.
     */
    const acquire = (goalId: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const token = newToken()
        const take = Effect.gen(function*() {
          const rows = yield* query(conn, selectLeaseSql, [goalId])
          if (rows[0] !== undefined) {
            const holder = yield* decodeHolder(goalId, rows[0])
            if (isAlive(holder, now, config.leaseTimeoutMs)) {
              return yield* new StateStore.LeaseHeld({ goalId, holder: describeHolder(holder) })
            }
          }
          yield* query(conn, upsertLeaseSql, [goalId, thisHost, process.pid, token, now, now])
        })
        yield* atomically(Effect.zipRight(immediate(conn, take), Effect.sync(() => processLeases.tokens.add(token)))).pipe(
          Effect.catchTag("SqlError", (error) => Effect.fail(toStoreError(where(`taking the lease of goal ${goalId}`, goalId), error)))
        )
        return token
      })

    /** Delete our row (only ours: a taker's row stays). Never fails: a failure is logged. */
    const release = (goalId: string, token: string) =>
      atomically(query(conn, deleteLeaseSql, [goalId, token])).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning(
            `releasing the lease of goal ${goalId} failed (${
              Cause.isFailType(cause) ? toStoreError(where("releasing", goalId), cause.error).message : Cause.pretty(cause)
            }); runners in other processes on this host see the goal as running until this process exits`
          )
        ),
        Effect.ensuring(Effect.sync(() => processLeases.tokens.delete(token)))
      )

    /**
     * Every `leaseHeartbeatMs`, record that the holder still runs (for runners on other hosts).
     * A failed beat is logged and retried at the next; a lease taken over ends the heartbeat.
     */
    const heartbeat = (goalId: string, token: string) =>
      Effect.gen(function*() {
        while (true) {
          yield* Effect.sleep(config.leaseHeartbeatMs)
          const now = yield* Clock.currentTimeMillis
          const beat = yield* atomically(query(conn, heartbeatSql, [now, goalId, token])).pipe(
            Effect.map((rows) => rows.length > 0),
            Effect.catchAllCause((cause) =>
              Effect.as(
                Effect.logWarning(`the heartbeat of the lease of goal ${goalId} failed: ${
                  Cause.isFailType(cause) ? toStoreError(where("heartbeat", goalId), cause.error).message : Cause.pretty(cause)
                }`),
                true
              )
            )
          )
          if (!beat) {
            return yield* Effect.logWarning(
              `the lease of goal ${goalId} is no longer this runner's: another runner took it over (its heartbeat was older than ${config.leaseTimeoutMs} ms there); the log's append check stops whichever of the two appends second`
            )
          }
        }
      })

    const lease: Service["lease"] = (goalId) =>
      config.readonly
        ? Effect.fail(
          new StoreError({
            message: `cannot run goal ${goalId}: the database ${config.filename} is read-only (opened with readonly: true); this store reads goals but cannot run them. Open it without readonly to run or resume a goal`,
            goalId
          })
        )
        : Effect.gen(function*() {
          const token = yield* Effect.acquireRelease(acquire(goalId), (token) => release(goalId, token))
          yield* Effect.forkScoped(heartbeat(goalId, token))
        })

    return StateStore.StateStore.of({ append, load, goal, goals, changes, snapshot, lease })
  })

/**
 * The SQLite store as a Layer: opens `filename` and closes it with the scope. A new log is
 * created only where no file exists (and `create` is not false); an existing file must be an rx
 * log (older schemas are migrated), and anything else is a `DatabaseRefused`, the file untouched.
 */
export const layer = (input: Config.Input): Layer.Layer<StateStore.StateStore, StoreError | DatabaseRefused> =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const config = yield* Config.decode(input)
      yield* prepare(config)
      return Layer.effect(StateStore.StateStore, makeWith(input, false)).pipe(Layer.provide(layerClient(input)))
    })
  )

const selectLeaseSql = "SELECT host, pid, token, acquired_at, heartbeat_at FROM leases WHERE goal_id = ?"
const upsertLeaseSql = `INSERT INTO leases (goal_id, host, pid, token, acquired_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (goal_id) DO UPDATE SET host = excluded.host, pid = excluded.pid, token = excluded.token,
  acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at`
const deleteLeaseSql = "DELETE FROM leases WHERE goal_id = ? AND token = ?"
const heartbeatSql = "UPDATE leases SET heartbeat_at = ? WHERE goal_id = ? AND token = ? RETURNING goal_id"

/** Goals whose summary and folded State are kept in memory between appends. */
const maxKnownGoals = 256

interface Known {
  readonly summary: GoalSummary.GoalSummary
  readonly state: State.State | undefined
}

const lastSeqSql = "SELECT max(seq) AS last FROM events WHERE goal_id = ?"
const selectEventsSql = "SELECT seq, tag, version, payload FROM events WHERE goal_id = ? AND seq >= ? ORDER BY seq"
const selectRangeSql = "SELECT seq, tag, version, payload FROM events WHERE goal_id = ? AND seq >= ? AND seq < ? ORDER BY seq"
const selectGoalSql = "SELECT * FROM goals WHERE goal_id = ?"
/** The summary after an append, only if the goal's log still ends at the expected seq (`goals_newest` untouched). */
const advanceGoalSql = `UPDATE goals SET status = ?, iterations = ?, next_seq = ?, last_iteration = ?, reason = ?, updated_at = ?
WHERE goal_id = ? AND next_seq = ?`
const upsertGoalSql = `INSERT INTO goals (goal_id, goal, status, iterations, next_seq, last_iteration, reason, submitted_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (goal_id) DO UPDATE SET goal = excluded.goal, status = excluded.status, iterations = excluded.iterations,
  next_seq = excluded.next_seq, last_iteration = excluded.last_iteration, reason = excluded.reason,
  submitted_at = excluded.submitted_at, updated_at = excluded.updated_at`
const upsertSnapshotSql = `INSERT INTO snapshots (goal_id, seq, state_version, state) VALUES (?, ?, ?, ?)
ON CONFLICT (goal_id) DO UPDATE SET seq = excluded.seq, state_version = excluded.state_version, state = excluded.state`
const selectSnapshotSql = "SELECT seq, state_version, state FROM snapshots WHERE goal_id = ?"

const insertSqls = new Map<number, string>()
/** `INSERT` of `n` events in one statement. */
const insertSql = (n: number): string => {
  const cached = insertSqls.get(n)
  if (cached !== undefined) return cached
  const sql = `INSERT INTO events (goal_id, seq, tag, version, payload) VALUES ${
    Array.from({ length: n }, () => "(?, ?, ?, ?, ?)").join(", ")
  }`
  insertSqls.set(n, sql)
  return sql
}

const summaryParams = (s: GoalSummary.GoalSummary): ReadonlyArray<unknown> => [
  s.goalId,
  s.goal,
  s.status,
  s.iterations,
  s.nextSeq,
  s.lastIteration,
  s.reason,
  s.submittedAt,
  s.updatedAt
]

const decodeSummaryEither = Schema.decodeUnknownEither(GoalSummary.GoalSummary)

/** A `goals` row as a `GoalSummary`. */
const decodeSummary = (row: unknown): Effect.Effect<GoalSummary.GoalSummary, StoreError> => {
  const goalId = field(row, "goal_id")
  return Either.match(
    decodeSummaryEither({
      goalId,
      goal: field(row, "goal"),
      status: field(row, "status"),
      iterations: field(row, "iterations"),
      nextSeq: field(row, "next_seq"),
      lastIteration: field(row, "last_iteration"),
      reason: field(row, "reason"),
      submittedAt: field(row, "submitted_at"),
      updatedAt: field(row, "updated_at")
    }),
    {
      onLeft: (error) =>
        Effect.fail(
          new StoreError({
            message: `the goals row of ${String(goalId)} does not decode: ${error.message}`,
            ...(typeof goalId === "string" ? { goalId } : {})
          })
        ),
      onRight: Effect.succeed
    }
  )
}

const decodeStateJson = Schema.decodeUnknownEither(Schema.parseJson(State.State))
const encodeStateJson = Schema.encodeEither(Schema.parseJson(State.State))

/** The State as snapshot JSON; a State that cannot be encoded is simply not snapshotted. */
const encodeState = (state: State.State): Either.Either<string, unknown> => encodeStateJson(state)

/** The goal's snapshot if it is of this rx's State version and decodes; otherwise none (fold from scratch). */
const readSnapshot = (conn: Connection, goalId: string) =>
  Effect.map(query(conn, selectSnapshotSql, [goalId]), (rows): Option.Option<StateStore.Snapshot> => {
    const row = rows[0]
    if (row === undefined || field(row, "state_version") !== State.version) return Option.none()
    const seq = field(row, "seq")
    const decoded = decodeStateJson(field(row, "state"))
    if (Either.isLeft(decoded) || decoded.right.goalId !== goalId || decoded.right.seq !== seq) return Option.none()
    return Option.some({ seq: decoded.right.seq, state: decoded.right })
  })
