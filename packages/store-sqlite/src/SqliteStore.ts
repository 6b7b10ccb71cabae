/**
 * The SQLite `StateStore`: one `events` row per event (its Schema's JSON, with the encoding
 * version and the payload format), a `goals` summary and a `snapshots` table kept in the same
 * transaction. Each batch is one `BEGIN IMMEDIATE` transaction that checks `expectedSeq` against
 * the stored log end, so two writers, in this process or another, can never both append at the
 * same seq. A goal's runner holds a row in `leases`, so a second runner stops before it touches
 * the goal. Snapshots are States the runner hands with its batches: the store folds nothing.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Clock, Context, Effect, Either, Layer, Option, Schema, type Scope } from "effect"
import { Event, Followers, GoalSummary, State, StateStore } from "@rx/kernel"
import * as Config from "./Config.js"
import { checksum } from "./internal/checksum.js"
import { decodeRows, eventColumns, Format, slimJson } from "./internal/codec.js"
import * as Database from "./internal/database.js"
import { DatabaseRefused, toStoreError } from "./internal/errors.js"
import { prepare } from "./internal/file.js"
import { decodeHolder, describeHolder, isAlive, isRunning, newToken, processLeases, thisHost } from "./internal/lease.js"
import { connection, field, query } from "./internal/sql.js"
import * as Wal from "./internal/wal.js"
import * as Migrations from "./Migrations.js"

export { DatabaseRefused }

type Service = StateStore.StateStore["Type"]
type StoreError = StateStore.StoreError
const StoreError = StateStore.StoreError

/**
 * An @effect/sql-sqlite-node client on the file with the store's settings (busy timeout,
 * `synchronous`; the journal as the file has it): a connection of its own, for tools and tests.
 * The store never uses it; `layerWithClient` gives a client over the store's own connection.
 */
export const layerClient = (input: Config.Input): Layer.Layer<SqliteClient.SqliteClient | SqlClient.SqlClient, StoreError> =>
  Layer.scopedContext(
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
      return Context.make(SqliteClient.SqliteClient, client).pipe(Context.add(SqlClient.SqlClient, client))
    })
  ).pipe(Layer.provide(Reactivity.layer))

/**
 * SQLite's `quick_check` (the b-tree structure, records and freelist; not index contents): a
 * damaged file is refused before anything is written to it. Linear in the file's size: about
 * 12 ms for a log of 10,000 iterations (9.5 MB) with the file in the page cache.
 */
const quickCheck = (db: Database.Database, config: Config.Config) =>
  Effect.gen(function*() {
    const rows = yield* db.read((tx) => Either.right(tx.all("PRAGMA quick_check(5)")))
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
 * Open the file as a log: create it where no file exists (unless `create: false`), refuse anything
 * that is not an rx log, run `quick_check` on a writable open (unless `quickCheck: false`), migrate
 * an older schema (never when read-only), switch a writable log to WAL. Closed with the scope.
 */
const open = (input: Config.Input): Effect.Effect<Opened, StoreError | DatabaseRefused, Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* Config.decode(input)
    yield* prepare(config)
    const opening = (error: unknown) => toStoreError({ ...config, what: `opening ${config.filename}` }, error)
    const db = yield* Database.open({
      filename: config.filename,
      readonly: config.readonly,
      fileMustExist: true,
      busyTimeoutMs: config.busyTimeoutMs,
      synchronous: config.synchronous
    }).pipe(Effect.mapError(opening))
    if (!config.readonly && config.quickCheck) yield* quickCheck(db, config)
    const schema = yield* Migrations.run(db.sql, { ...config, create: false })
    // WAL: readers never block the writer, so other processes read while a run appends.
    const mode = config.readonly
      ? undefined
      : yield* db.read((tx) => Either.right(field(tx.get("PRAGMA journal_mode = WAL"), "journal_mode"))).pipe(Effect.mapError(opening))
    const wal = typeof mode === "string" && mode.toLowerCase() === "wal" ? Wal.watch(config.filename) : undefined
    return { db, store: yield* makeStore(db, config, schema, wal) }
  })

interface Opened {
  readonly db: Database.Database
  readonly store: Service
}

/** The store on `config.filename`, open until the scope closes (see `layer`). */
export const make = (input: Config.Input): Effect.Effect<Service, StoreError | DatabaseRefused, Scope.Scope> =>
  Effect.map(open(input), (opened) => opened.store)

/**
 * The SQLite store as a Layer: opens `filename` and closes it with the scope. A new log is
 * created only where no file exists (and `create` is not false); an existing file must be an rx
 * log (older schemas are migrated), and anything else is a `DatabaseRefused`, the file untouched.
 */
export const layer = (input: Config.Input): Layer.Layer<StateStore.StateStore, StoreError | DatabaseRefused> =>
  Layer.scoped(StateStore.StateStore, make(input))

/**
 * The store and an @effect/sql client over its own connection, for statements of your own
 * (maintenance, fault injection in tests). The client's statements never fall inside one of the
 * store's operations; a transaction held through it makes the store's operations wait for it.
 */
export const layerWithClient = (
  input: Config.Input
): Layer.Layer<StateStore.StateStore | SqlClient.SqlClient, StoreError | DatabaseRefused> =>
  Layer.scopedContext(
    Effect.map(open(input), ({ db, store }) => Context.make(StateStore.StateStore, store).pipe(Context.add(SqlClient.SqlClient, db.sql)))
  )

/**
 * The store's operations over an open database of schema version `schema`; `wal` watches its
 * `-wal` file when it is in WAL mode and writable.
 */
const makeStore = (
  db: Database.Database,
  config: Config.Config,
  schema: number,
  wal: Wal.Watch | undefined
): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.gen(function*() {
    const failed = (what: string, goalId?: string, seq?: number) => (error: SqlError) => toStoreError({ ...config, what, goalId, seq }, error)
    const columns = eventColumns(schema)
    const selectEventsSql = `SELECT ${columns} FROM events WHERE goal_id = ? AND seq >= ? ORDER BY seq`
    const selectFirstEventSql = `SELECT ${columns} FROM events WHERE goal_id = ? AND seq = 0`

    /**
     * The followers in this process: this store's appends are handed to them as they commit; a
     * commit by another connection (`poll`) makes them read the log again.
     */
    const followers = Followers.make()
    /**
     * One poller for the whole store, started by the first follower and stopped with the store:
     * `PRAGMA data_version` moves only when another connection commits, so an idle log costs one
     * pragma per interval, however many goals are followed. Its first value is read as it starts,
     * before that follower's first read (and every follower waits for it), so a commit by another
     * connection that falls after a follower's read is always one it sees move.
     */
    const scope = yield* Effect.scope
    const dataVersion = Effect.either(db.read((tx) => Either.right(field(tx.get("PRAGMA data_version"), "data_version"))))
    const poll = (first: Either.Either<unknown, SqlError>) =>
      Effect.gen(function*() {
        let seen = first
        while (true) {
          yield* Effect.sleep(config.pollIntervalMs)
          const now = yield* dataVersion
          // A failed read wakes the followers too: their own reads then say what is wrong.
          if (Either.isLeft(now) || Either.isLeft(seen) || now.right !== seen.right) followers.changed()
          seen = now
        }
      })
    const startPolling = yield* Effect.cached(Effect.asVoid(Effect.flatMap(dataVersion, (first) => Effect.forkIn(poll(first), scope))))
    /**
     * The `goals` row of each goal this store appended to last, as it wrote it (up to
     * `maxCachedSummaries`), so its next append computes the new summary without reading the row.
     * It is only a hint: the append's `UPDATE ... WHERE next_seq = ?` checks it against the row.
     */
    const summaries = new Map<string, GoalSummary.GoalSummary>()

    /** Whether a batch of `count` events at `expectedSeq` crosses a multiple of `snapshotEvery`. */
    const snapshotDue = (expectedSeq: number, count: number) =>
      Math.floor((expectedSeq + count) / config.snapshotEvery) > Math.floor(expectedSeq / config.snapshotEvery)

    /**
     * The snapshot row of the State handed with a batch ending at `end`. A State that is not the
     * goal's after the batch, or does not encode, is not saved (a warning; the append goes on).
     */
    const snapshotRow = (goalId: string, end: number, state: State.State): Effect.Effect<ReadonlyArray<unknown> | undefined> => {
      if (state.goalId !== goalId || state.seq !== end) {
        return Effect.as(
          Effect.logWarning(
            `goal ${goalId}: the State handed with the events up to seq ${end} is goal ${state.goalId}'s at seq ${state.seq}; no snapshot is saved`
          ),
          undefined
        )
      }
      return Either.match(encodeStateJson(state), {
        onLeft: (error) =>
          Effect.as(Effect.logWarning(`goal ${goalId}: the State at seq ${end} does not encode (${error.message}); no snapshot is saved`), undefined),
        onRight: (json) => Effect.succeed([goalId, end, State.version, json])
      })
    }

    /**
     * Why the store no longer writes, once the `-wal` file was found deleted or replaced: every
     * later append fails with it, before writing anything.
     */
    let walLost: string | undefined
    /** After a commit of goal `goalId` at `expectedSeq`: the error if the `-wal` it went to is no longer the log's. */
    const checkWal = (goalId: string, expectedSeq: number): StoreError | undefined => {
      const problem = wal?.check()
      if (wal === undefined || problem === undefined) return undefined
      const which = expectedSeq === 0 ? "" : ` after seq ${expectedSeq - 1}`
      walLost =
        `the log's -wal file ${wal.path} was deleted or replaced by another process while rx had ${config.filename} open (it ${problem}, seen after committing goal ${goalId}'s events from seq ${expectedSeq}): the events of goal ${goalId}${which} may be lost, and so may any other commit SQLite had not yet copied from that file into ${config.filename} (SQLite copies them when rx closes the log, unless another process opened it meanwhile). rx stops writing to this log: find what removes files beside it and stop it, then check the log with rx doctor --db ${config.filename} and resume the goal`
      return new StoreError({ message: walLost, goalId, seq: expectedSeq })
    }

    const append: Service["append"] = (goalId, expectedSeq, events, state) =>
      Effect.suspend(() => {
        if (walLost !== undefined) {
          return new StoreError({ message: `goal ${goalId}: nothing appended at seq ${expectedSeq}: ${walLost}`, goalId, seq: expectedSeq })
        }
        const params: Array<unknown> = []
        for (const event of events) {
          const payload = Either.try({ try: () => slimJson(event), catch: (error) => String(error) })
          if (Either.isLeft(payload)) {
            return new StoreError({
              message: `goal ${goalId}: ${event._tag} at seq ${event.seq} cannot be encoded as JSON (${payload.left})`,
              goalId,
              seq: event.seq
            })
          }
          params.push(goalId, event.seq, event._tag, Event.version, Format.slim, payload.right, checksum(payload.right))
        }
        const invalid = StateStore.validateBatch(goalId, expectedSeq, events)
        const write = (snapshot: ReadonlyArray<unknown> | undefined) =>
          db.write((tx) => appendIn(tx, goalId, expectedSeq, events, params, invalid, snapshot)).pipe(
            Effect.catchTag("SqlError", (error) => Effect.fail(failed(`appending to goal ${goalId} at seq ${expectedSeq}`, goalId, expectedSeq)(error))),
            Effect.flatMap((summary) => {
              summaries.delete(goalId)
              // Committed, but perhaps to a -wal file no longer in the folder: say so and stop.
              const lost = events.length > 0 ? checkWal(goalId, expectedSeq) : undefined
              if (lost !== undefined) return Effect.fail(lost)
              if (summary !== undefined && summary.status === "open") {
                summaries.set(goalId, summary)
                if (summaries.size > maxCachedSummaries) {
                  const oldest = summaries.keys().next()
                  if (oldest.done !== true) summaries.delete(oldest.value)
                }
              }
              followers.appended(goalId, expectedSeq, events)
              return Effect.void
            })
          )
        // Appends without a State (from outside a runner) never save a snapshot.
        return state !== undefined && snapshotDue(expectedSeq, events.length)
          ? Effect.flatMap(snapshotRow(goalId, expectedSeq + events.length, state), write)
          : write(undefined)
      })

    /**
     * The append inside its transaction: check the log end, insert the events, update the goal's
     * summary, save the snapshot row if any. Returns the goal's new summary.
     */
    const appendIn = (
      tx: Database.Tx,
      goalId: string,
      expectedSeq: number,
      events: ReadonlyArray<Event.Event>,
      params: ReadonlyArray<unknown>,
      invalid: Option.Option<StoreError>,
      snapshot: ReadonlyArray<unknown> | undefined
    ): Either.Either<GoalSummary.GoalSummary | undefined, StateStore.AppendConflict | StoreError> => {
      const cached = summaries.get(goalId)
      const fresh = cached !== undefined && cached.nextSeq === expectedSeq ? cached : undefined
      if (fresh !== undefined && events.length > 0 && Option.isNone(invalid)) {
        // The common case, this store's own next append: the summary row, updated only if it is
        // still at `expectedSeq`, is the log-end check (it moves with every append).
        const summary = GoalSummary.updateAll(fresh, events)
        if (summary !== undefined && summary.goal === fresh.goal && summary.submittedAt === fresh.submittedAt) {
          const updated = tx.run(advanceGoalSql, [
            summary.status,
            summary.iterations,
            summary.nextSeq,
            summary.lastIteration,
            summary.reason,
            ...Migrations.waitingParams(summary),
            summary.updatedAt,
            goalId,
            expectedSeq
          ])
          if (updated === 1) {
            insertEvents(tx, params)
            if (snapshot !== undefined) tx.run(upsertSnapshotSql, snapshot)
            return Either.right(summary)
          }
        }
      }
      // Otherwise check the log itself and read the summary row.
      const last = field(tx.get(lastSeqSql, [goalId]), "last")
      const actualSeq = typeof last === "number" ? last + 1 : 0
      if (actualSeq !== expectedSeq) return Either.left(new StateStore.AppendConflict({ goalId, expectedSeq, actualSeq }))
      if (Option.isSome(invalid)) return Either.left(invalid.value)
      if (events.length === 0) return Either.right(undefined)
      let summary = fresh
      if (summary === undefined && expectedSeq > 0) {
        const row = tx.get(selectGoalSql, [goalId])
        if (row !== undefined) {
          const decoded = decodeSummary(row)
          if (Either.isLeft(decoded)) return decoded
          summary = decoded.right
        }
      }
      summary = GoalSummary.updateAll(summary, events)
      insertEvents(tx, params)
      if (summary !== undefined) tx.run(upsertGoalSql, summaryParams(summary))
      if (snapshot !== undefined) tx.run(upsertSnapshotSql, snapshot)
      return Either.right(summary)
    }

    const load: Service["load"] = (goalId, fromSeq = 0) =>
      db.read((tx) => Either.right(tx.values(selectEventsSql, [goalId, fromSeq]))).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(failed(`loading goal ${goalId}`, goalId)(error))),
        Effect.flatMap((rows) => decodeRows(goalId, fromSeq, rows))
      )

    /** Every event from `fromSeq`, and the seq after the last. */
    const loadAll = (goalId: string, fromSeq: number) =>
      Effect.map(load(goalId, fromSeq), (events) => ({ events, end: fromSeq + events.length }))

    /**
     * The events from `fromSeq` of the given kinds, and the seq after the log's last event; the
     * others are not even read (the runner's cancel watcher polls for one kind all run long).
     */
    const loadTagged = (goalId: string, fromSeq: number, tags: ReadonlyArray<string>) =>
      db.read((tx) => {
        const last = field(tx.get(lastSeqSql, [goalId]), "last")
        const end = typeof last === "number" ? last + 1 : 0
        if (end <= fromSeq || tags.length === 0) return Either.right({ rows: [], end: Math.max(end, fromSeq) })
        const rows = tx.values(
          `SELECT ${columns} FROM events WHERE goal_id = ? AND seq >= ? AND seq < ? AND tag IN (${tags.map(() => "?").join(", ")}) ORDER BY seq`,
          [goalId, fromSeq, end, ...tags]
        )
        return Either.right({ rows, end })
      }).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(failed(`loading goal ${goalId}`, goalId)(error))),
        Effect.flatMap(({ end, rows }) => Effect.map(decodeRows(goalId, undefined, rows), (events) => ({ events, end })))
      )

    /**
     * A summary as read. A read-only store over an older schema reads what its `goals` row lacks
     * from the goal's log: why an open goal waits (the tail from the last event that can set it),
     * and where a fork was forked from (its first event).
     */
    const summaryOf = (row: unknown): Effect.Effect<GoalSummary.GoalSummary, StoreError> =>
      schema >= Migrations.forkColumnSince ? decodeSummary(row) : Effect.flatMap(decodeSummary(row), (summary) => {
        const goalId = summary.goalId
        const read = <A>(f: (tx: Database.Tx) => A) =>
          db.read((tx) => Either.right(f(tx))).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(failed(`reading goal ${goalId}`, goalId)(error))))
        const waiting = schema >= Migrations.waitingColumnsSince || summary.status !== "open"
          ? Effect.succeed<GoalSummary.Waiting>(summary)
          : Effect.flatMap(read((tx) => {
            const from = Migrations.tailFrom([tx.get(Migrations.waitingTailSql, [goalId])])
            return from === undefined ? undefined : { from, rows: tx.values(selectEventsSql, [goalId, from]) }
          }), (tail) => tail === undefined ? Effect.succeed(GoalSummary.notWaiting) : Effect.map(decodeRows(goalId, tail.from, tail.rows), GoalSummary.waitingOf))
        const forkedFrom = Effect.map(
          Effect.flatMap(read((tx) => tx.values(selectFirstEventSql, [goalId])), (rows) => decodeRows(goalId, 0, rows)),
          (events) => (events[0]?._tag === "GoalSubmitted" ? events[0].forkedFrom ?? null : null)
        )
        return Effect.map(Effect.all([waiting, forkedFrom]), ([w, f]) => ({ ...summary, suspended: w.suspended, approval: w.approval, forkedFrom: f }))
      })

    const goal: Service["goal"] = (goalId) =>
      db.read((tx) => Either.right(tx.get(selectGoalSql, [goalId]))).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(failed(`reading goal ${goalId}`, goalId)(error))),
        Effect.flatMap((row) => (row === undefined ? Effect.succeed(Option.none()) : Effect.map(summaryOf(row), Option.some)))
      )

    const goals: Service["goals"] = (q = {}) => {
      // No goal of a schema before the parent column has a parent.
      if (q.parent !== undefined && schema < Migrations.parentColumnSince) return Effect.succeed([])
      // Before the fork column, a goal's origin is in its first event: each goal's is read.
      if (q.forkedFrom !== undefined && schema < Migrations.forkColumnSince) {
        const { forkedFrom, limit, ...rest } = q
        return Effect.map(goals(rest), (all) => all.filter((g) => g.forkedFrom?.goalId === forkedFrom).slice(0, limit))
      }
      const conditions = [
        ...(q.status === undefined ? [] : ["status = ?"]),
        ...(q.parent === undefined ? [] : ["parent = ?"]),
        ...(q.forkedFrom === undefined ? [] : ["forked_from IS NOT NULL AND json_extract(forked_from, '$.goalId') = ?"])
      ]
      const where = conditions.length === 0 ? "" : ` WHERE ${conditions.join(" AND ")}`
      const limit = q.limit === undefined ? "" : " LIMIT ?"
      const params = [
        ...(q.status === undefined ? [] : [q.status]),
        ...(q.parent === undefined ? [] : [q.parent]),
        ...(q.forkedFrom === undefined ? [] : [q.forkedFrom]),
        ...(q.limit === undefined ? [] : [q.limit])
      ]
      return db.read((tx) => Either.right(tx.all(`SELECT * FROM goals${where} ORDER BY submitted_at DESC, goal_id DESC${limit}`, params))).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(failed("listing goals")(error))),
        Effect.flatMap((rows) => Effect.forEach(rows, summaryOf))
      )
    }

    /**
     * Follow the goal from `fromSeq` while the scope is open: each run of the returned Effect
     * gives the next events of `tags` kinds (all without), at least one, waiting for them.
     */
    const follow = (goalId: string, fromSeq: number, tags: ReadonlyArray<string> | undefined) =>
      Effect.zipLeft(
        // Watched before the first read, so no append of this process falls in between.
        followers.follow(goalId, fromSeq, tags, (cursor) => (tags === undefined ? loadAll(goalId, cursor) : loadTagged(goalId, cursor, tags))),
        startPolling
      )

    /** The latest snapshot, if it is of this rx's State version and decodes; otherwise none (fold from the start). */
    const snapshot: Service["snapshot"] = (goalId) =>
      db.read((tx) => Either.right(tx.get(selectSnapshotSql, [goalId]))).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(failed(`reading the snapshot of goal ${goalId}`, goalId)(error))),
        Effect.flatMap((row): Effect.Effect<Option.Option<StateStore.Snapshot>> => {
          if (row === undefined || field(row, "state_version") !== State.version) return Effect.succeed(Option.none())
          const seq = field(row, "seq")
          const decoded = decodeStateJson(field(row, "state"))
          if (Either.isRight(decoded) && decoded.right.goalId === goalId && decoded.right.seq === seq) {
            return Effect.succeed(Option.some({ seq: decoded.right.seq, state: decoded.right }))
          }
          const why = Either.isLeft(decoded) ? decoded.left.message : `it holds goal ${decoded.right.goalId}'s State at seq ${decoded.right.seq}`
          return Effect.as(
            Effect.logWarning(`goal ${goalId}: its snapshot at seq ${String(seq)} is not usable (${why}); its State is folded from the start`),
            Option.none()
          )
        })
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
        yield* db.write((tx): Either.Either<void, StateStore.LeaseHeld | StoreError> => {
          const row = tx.get(selectLeaseSql, [goalId])
          if (row !== undefined) {
            const holder = decodeHolder(goalId, row)
            if (Either.isLeft(holder)) return holder
            if (isAlive(holder.right, now, config.leaseTimeoutMs)) {
              return Either.left(new StateStore.LeaseHeld({ goalId, holder: describeHolder(holder.right) }))
            }
          }
          tx.run(upsertLeaseSql, [goalId, thisHost, process.pid, token, now, now])
          return Either.void
        }).pipe(
          Effect.catchTag("SqlError", (error) => Effect.fail(toStoreError(where(`taking the lease of goal ${goalId}`, goalId), error)))
        )
        processLeases.tokens.add(token)
        return token
      })

    /** Delete our row (only ours: a taker's row stays). Never fails: a failure is logged. */
    const release = (goalId: string, token: string) =>
      db.write((tx) => Either.right(tx.run(deleteLeaseSql, [goalId, token]))).pipe(
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
          const beat = yield* db.write((tx) => Either.right(tx.run(heartbeatSql, [now, goalId, token]) > 0)).pipe(
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

    /**
     * The lease's holder while it runs: its process exists (on this host) and its heartbeat is
     * younger than `leaseTimeoutMs`. A read, so it works on a read-only open too; a log of
     * schema 1, which only a read-only store opens as is, has no leases until a runner migrates it.
     */
    const runner: Service["runner"] = (goalId) =>
      Effect.gen(function*() {
        const row = yield* db.read((tx) =>
          Either.right(schema < 2 && tx.get(leasesTableSql) === undefined ? undefined : tx.get(selectLeaseSql, [goalId]))
        ).pipe(
          Effect.catchTag("SqlError", (error) => Effect.fail(toStoreError(where(`reading the lease of goal ${goalId}`, goalId), error)))
        )
        if (row === undefined) return Option.none()
        const holder = yield* decodeHolder(goalId, row)
        const now = yield* Clock.currentTimeMillis
        return isRunning(holder, now, config.leaseTimeoutMs) ? Option.some(describeHolder(holder)) : Option.none()
      })

    return StateStore.StateStore.of({ append, load, goal, goals, ...StateStore.followedBy(follow), snapshot, lease, runner })
  })

const selectLeaseSql = "SELECT host, pid, token, acquired_at, heartbeat_at FROM leases WHERE goal_id = ?"
const leasesTableSql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'leases'"
const upsertLeaseSql = `INSERT INTO leases (goal_id, host, pid, token, acquired_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (goal_id) DO UPDATE SET host = excluded.host, pid = excluded.pid, token = excluded.token,
  acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at`
const deleteLeaseSql = "DELETE FROM leases WHERE goal_id = ? AND token = ?"
const heartbeatSql = "UPDATE leases SET heartbeat_at = ? WHERE goal_id = ? AND token = ?"

/** Goals whose summary row is kept in memory between appends. */
const maxCachedSummaries = 256

const lastSeqSql = "SELECT max(seq) AS last FROM events WHERE goal_id = ?"
const selectGoalSql = "SELECT * FROM goals WHERE goal_id = ?"
/** The summary after an append, only if the goal's log still ends at the expected seq (`goals_newest` untouched). */
const advanceGoalSql = `UPDATE goals SET status = ?, iterations = ?, next_seq = ?, last_iteration = ?, reason = ?, suspended = ?, approval = ?,
  updated_at = ? WHERE goal_id = ? AND next_seq = ?`
const upsertGoalSql = `INSERT INTO goals (goal_id, goal, status, iterations, next_seq, last_iteration, reason, suspended, approval, submitted_at, updated_at, parent, forked_from)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (goal_id) DO UPDATE SET goal = excluded.goal, parent = excluded.parent, forked_from = excluded.forked_from, status = excluded.status, iterations = excluded.iterations,
  next_seq = excluded.next_seq, last_iteration = excluded.last_iteration, reason = excluded.reason,
  suspended = excluded.suspended, approval = excluded.approval, submitted_at = excluded.submitted_at, updated_at = excluded.updated_at`
const upsertSnapshotSql = `INSERT INTO snapshots (goal_id, seq, state_version, state) VALUES (?, ?, ?, ?)
ON CONFLICT (goal_id) DO UPDATE SET seq = excluded.seq, state_version = excluded.state_version, state = excluded.state`
const selectSnapshotSql = "SELECT seq, state_version, state FROM snapshots WHERE goal_id = ?"

/** The parameters of one event's row in `insertSql`. */
const rowParams = 7

/**
 * Events per `INSERT` statement at most: a batch of any size (an answer of thousands of calls) is
 * inserted in statements of this many rows, all in the append's one transaction, far below
 * SQLite's limit of 32,766 bound parameters a statement. It also bounds the statements cached
 * (one per row count up to it).
 */
const rowsPerInsert = 64

const insertSqls = new Map<number, string>()
/** `INSERT` of `n` events in one statement. */
const insertSql = (n: number): string => {
  const cached = insertSqls.get(n)
  if (cached !== undefined) return cached
  const sql = `INSERT INTO events (goal_id, seq, tag, version, format, payload, checksum) VALUES ${
    Array.from({ length: n }, () => "(?, ?, ?, ?, ?, ?, ?)").join(", ")
  }`
  insertSqls.set(n, sql)
  return sql
}

/** Insert the rows whose parameters are `params` (`rowParams` a row), `rowsPerInsert` rows a statement. */
const insertEvents = (tx: Database.Tx, params: ReadonlyArray<unknown>): void => {
  const rows = params.length / rowParams
  if (rows <= rowsPerInsert) {
    tx.run(insertSql(rows), params)
    return
  }
  for (let from = 0; from < rows; from += rowsPerInsert) {
    const n = Math.min(rowsPerInsert, rows - from)
    tx.run(insertSql(n), params.slice(from * rowParams, (from + n) * rowParams))
  }
}

const summaryParams = (s: GoalSummary.GoalSummary): ReadonlyArray<unknown> => [
  s.goalId,
  s.goal,
  s.status,
  s.iterations,
  s.nextSeq,
  s.lastIteration,
  s.reason,
  ...Migrations.waitingParams(s),
  s.submittedAt,
  s.updatedAt,
  s.parent,
  Migrations.forkedFromParam(s.forkedFrom)
]

const decodeSummaryEither = Schema.decodeUnknownEither(GoalSummary.Stored)

/** A `goals` row as a `GoalSummary`. */
const decodeSummary = (row: unknown): Either.Either<GoalSummary.GoalSummary, StoreError> => {
  const goalId = field(row, "goal_id")
  return Either.mapLeft(
    decodeSummaryEither({
      goalId,
      goal: field(row, "goal"),
      // A database of a schema before the column has no sub-goals.
      parent: field(row, "parent") ?? null,
      // Before its column, read from the goal's first event (`summaryOf`).
      forkedFrom: field(row, "forked_from") ?? null,
      status: field(row, "status"),
      iterations: field(row, "iterations"),
      nextSeq: field(row, "next_seq"),
      lastIteration: field(row, "last_iteration"),
      reason: field(row, "reason"),
      suspended: field(row, "suspended") ?? null,
      approval: field(row, "approval") ?? null,
      submittedAt: field(row, "submitted_at"),
      updatedAt: field(row, "updated_at")
    }),
    (error) =>
      new StoreError({
        message: `the goals row of ${String(goalId)} does not decode: ${error.message}`,
        ...(typeof goalId === "string" ? { goalId } : {})
      })
  )
}

const decodeStateJson = Schema.decodeUnknownEither(Schema.parseJson(State.State))
const encodeStateJson = Schema.encodeEither(Schema.parseJson(State.State))
