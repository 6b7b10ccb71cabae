/**
 * The Postgres `StateStore`, for many processes on many hosts sharing one log. One `rx_events` row
 * per event (its Schema's JSON), a `rx_goals` summary and `rx_snapshots` kept in the same
 * transaction. An append locks its goal's summary row (`SELECT ... FOR UPDATE`) and checks
 * `expectedSeq` against the `next_seq` there, so of writers racing at one seq, from any process,
 * exactly one appends and the others get an `AppendConflict`; the `(goal_id, seq)` primary key
 * settles the race for a goal's first event. Leases are rows tied to a database session and
 * renewed before they expire; `changes` wakes on LISTEN/NOTIFY, never by polling.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Context, Effect, Either, Layer, Option, Redacted, Schema, type Scope } from "effect"
import { Event, Followers, GoalSummary, State, StateStore } from "@rx/kernel"
import * as Config from "./Config.js"
import { checksum } from "./internal/checksum.js"
import { corrupt, decodeRows, eventColumns } from "./internal/codec.js"
import { DatabaseRefused, isUniqueViolation, toStoreError } from "./internal/errors.js"
import * as Lease from "./internal/lease.js"
import * as Echoes from "./internal/echoes.js"
import * as Listener from "./internal/listener.js"
import { field, rows, transaction, values } from "./internal/sql.js"
import * as Migrations from "./Migrations.js"

export { DatabaseRefused }

type Service = StateStore.StateStore["Type"]
type StoreError = StateStore.StoreError
const StoreError = StateStore.StoreError

/** The database a URL names, as `host:port/name` (never the password), for messages. */
export const describe = (url: string): string =>
  Either.match(Either.try(() => new URL(url)), {
    onLeft: () => "the configured database",
    onRight: (parsed) => `${parsed.hostname}:${parsed.port === "" ? "5432" : parsed.port}${parsed.pathname === "" ? "/" : parsed.pathname}`
  })

/**
 * A PgClient with the store's settings: its pool, for statements of your own. Its first
 * connection is made where interruption cannot reach (a resource's acquisition), so a stop while
 * a database does not answer would wait `connectTimeoutMs`; disconnected, the stop goes on at
 * once and the attempt ends in the background, its pool closed with the scope.
 */
const client = (config: Config.Config): Effect.Effect<PgClient.PgClient, StoreError, Scope.Scope> =>
  PgClient.make({
    url: Redacted.make(config.url),
    maxConnections: config.maxConnections,
    connectTimeout: config.connectTimeoutMs,
    applicationName: config.applicationName
  }).pipe(
    Effect.disconnect,
    Effect.provide(Reactivity.layer),
    Effect.mapError((error) => toStoreError({ database: describe(config.url), what: `connecting to ${describe(config.url)}` }, error))
  )

/** Open the store: connect, migrate, build its operations; closed with the scope. */
const open = (input: Config.Input) =>
  Effect.gen(function*() {
    const config = yield* Config.decode(input)
    const pg = yield* client(config)
    const store = yield* makeWithClient(pg, input)
    return { pg, store }
  })

/** The store on `config.url`, open until the scope closes (see `layer`). */
export const make = (input: Config.Input): Effect.Effect<Service, StoreError | DatabaseRefused, Scope.Scope> =>
  Effect.map(open(input), ({ store }) => store)

/**
 * The Postgres store as a Layer: connects to `url`, creates or migrates rx's tables (`rx_*`) in
 * the connection's current schema, and closes its connections with the scope. A database holding
 * a newer rx's schema is a `DatabaseRefused`, untouched.
 */
export const layer = (input: Config.Input): Layer.Layer<StateStore.StateStore, StoreError | DatabaseRefused> =>
  Layer.scoped(StateStore.StateStore, make(input))

/** The store and its PgClient (and SqlClient), for statements of your own (maintenance, tests). */
export const layerWithClient = (
  input: Config.Input
): Layer.Layer<StateStore.StateStore | PgClient.PgClient | SqlClient.SqlClient, StoreError | DatabaseRefused> =>
  Layer.scopedContext(
    Effect.map(open(input), ({ pg, store }) =>
      Context.make(StateStore.StateStore, store).pipe(Context.add(PgClient.PgClient, pg), Context.add(SqlClient.SqlClient, pg)))
  )

/**
 * The store over a PgClient you already have (its pool needs room for one connection per
 * concurrent append and read, plus one held while the store leases goals). Migrates first.
 */
export const makeWithClient = (
  pg: PgClient.PgClient,
  input: Config.Input
): Effect.Effect<Service, StoreError | DatabaseRefused, Scope.Scope> =>
  Effect.gen(function*() {
    const config = yield* Config.decode(input)
    const database = describe(config.url)
    yield* Migrations.run(pg, database)
    const failed = (what: string, goalId?: string, seq?: number) => (error: unknown) => toStoreError({ database, what, goalId, seq }, error)
    /**
     * The followers in this process: this store's appends are handed to them as they commit, and
     * a notification of another session's commit makes those of its goal read the log again
     * (`Echoes`: the notifications of this store's own appends are passed over).
     */
    const followers = Followers.make()
    const echoes = Echoes.make(followers)
    /**
     * The summary row of each goal this store appended to last, as it wrote it (up to
     * `maxCachedSummaries`): its next append moves the row on in one statement (`advanceSql`, only
     * where the row is still at the expected seq), with no lock to take. Only a hint: a row that
     * moved on meanwhile (another writer appended) is read again under its lock.
     */
    const written = new Map<string, GoalSummary.GoalSummary>()
    const remember = (goalId: string, summary: GoalSummary.GoalSummary | undefined) => {
      written.delete(goalId)
      if (summary === undefined) return
      if (written.size >= maxCachedSummaries) {
        const oldest = written.keys().next()
        if (oldest.done !== true) written.delete(oldest.value)
      }
      written.set(goalId, summary)
    }
    const listener = yield* Listener.make(pg, { checkMs: config.listenCheckMs, timeoutMs: config.connectTimeoutMs, database }, echoes.notified)
    const presence = yield* Lease.makePresence(pg)

    /** Whether a batch of `count` events at `expectedSeq` crosses a multiple of `snapshotEvery`. */
    const snapshotDue = (expectedSeq: number, count: number) =>
      Math.floor((expectedSeq + count) / config.snapshotEvery) > Math.floor(expectedSeq / config.snapshotEvery)

    /** The snapshot's parameters, if the State handed with a batch ending at `end` is the goal's there and encodes. */
    const snapshotParams = (goalId: string, end: number, state: State.State): Effect.Effect<ReadonlyArray<unknown> | undefined> => {
      if (state.goalId !== goalId || state.seq !== end) {
        return Effect.as(
          Effect.logWarning(`goal ${goalId}: the State handed with the events up to seq ${end} is goal ${state.goalId}'s at seq ${state.seq}; no snapshot is saved`),
          undefined
        )
      }
      return Either.match(encodeStateJson(state), {
        onLeft: (error) => Effect.as(Effect.logWarning(`goal ${goalId}: the State at seq ${end} does not encode (${error.message}); no snapshot is saved`), undefined),
        onRight: (json) => Effect.succeed([goalId, end, State.version, json])
      })
    }

    /** The log's end and summary, with the goal's row locked until the transaction ends. */
    const lockGoal = (conn: Connection, goalId: string) =>
      Effect.gen(function*() {
        const found = yield* conn.execute(lockGoalSql, [goalId], undefined)
        const row = found[0]
        if (row !== undefined) {
          const summary = yield* decodeSummary(row)
          return { end: summary.nextSeq, summary: Option.some(summary) }
        }
        // No summary: no GoalSubmitted was appended, so the log is empty (unless rows were removed by hand).
        const last = field((yield* conn.execute(lastSeqSql, [goalId], undefined))[0], "last")
        return { end: typeof last === "number" ? last + 1 : 0, summary: Option.none<GoalSummary.GoalSummary>() }
      })

    const appendIn = (
      conn: Connection,
      goalId: string,
      expectedSeq: number,
      events: ReadonlyArray<Event.Event>,
      payloads: ReadonlyArray<string>,
      checksums: ReadonlyArray<number>,
      snapshot: ReadonlyArray<unknown> | undefined
    ): Effect.Effect<GoalSummary.GoalSummary | undefined, StateStore.AppendConflict | StoreError | SqlError> =>
      Effect.gen(function*() {
        const { end, summary } = yield* lockGoal(conn, goalId)
        if (end !== expectedSeq) return yield* new StateStore.AppendConflict({ goalId, expectedSeq, actualSeq: end })
        const invalid = StateStore.validateBatch(goalId, expectedSeq, events)
        if (Option.isSome(invalid)) return yield* invalid.value
        if (events.length === 0) return Option.getOrUndefined(summary)
        const next = GoalSummary.updateAll(Option.getOrUndefined(summary), events)
        if (next === undefined) return yield* new StoreError({ message: `goal ${goalId}: its log has no GoalSubmitted`, goalId, seq: expectedSeq })
        yield* conn.execute(appendSql, appendParams(goalId, events, payloads, checksums, next), undefined)
        if (snapshot !== undefined) yield* conn.execute(upsertSnapshotSql, snapshot, undefined)
        return next
      })

    /** The first events of a new goal and its summary, in one statement (`firstAppendSql`), with no lock to take. */
    const firstAppend = (
      goalId: string,
      events: ReadonlyArray<Event.Event>,
      payloads: ReadonlyArray<string>,
      checksums: ReadonlyArray<number>
    ): Effect.Effect<GoalSummary.GoalSummary, StateStore.AppendConflict | StoreError | SqlError> =>
      Effect.gen(function*() {
        const invalid = StateStore.validateBatch(goalId, 0, events)
        if (Option.isSome(invalid)) return yield* invalid.value
        const next = GoalSummary.updateAll(undefined, events)
        if (next === undefined) return yield* new StoreError({ message: `goal ${goalId}: its log must start with GoalSubmitted`, goalId, seq: 0 })
        yield* rows(pg, firstAppendSql, appendParams(goalId, events, payloads, checksums, next))
        return next
      })

    /**
     * Events after `summary` (the row as this store last wrote it), in one statement
     * (`advanceSql`); undefined, with nothing written, when the row moved on meanwhile or the
     * batch does not continue the log: the locking path then says why.
     */
    const nextAppend = (
      goalId: string,
      summary: GoalSummary.GoalSummary,
      events: ReadonlyArray<Event.Event>,
      payloads: ReadonlyArray<string>,
      checksums: ReadonlyArray<number>
    ): Effect.Effect<GoalSummary.GoalSummary | undefined, SqlError> =>
      Effect.gen(function*() {
        if (Option.isSome(StateStore.validateBatch(goalId, summary.nextSeq, events))) return undefined
        const next = GoalSummary.updateAll(summary, events)
        if (next === undefined) return undefined
        const moved = yield* rows(pg, advanceSql, [
          goalId,
          Event.version,
          events.map((e) => e.seq),
          events.map((e) => e._tag),
          payloads,
          checksums,
          next.status,
          next.iterations,
          next.nextSeq,
          next.lastIteration,
          next.reason,
          next.updatedAt,
          ...Migrations.waitingParams(next),
          Listener.payloadOf(goalId),
          summary.nextSeq
        ])
        return moved.length === 0 ? undefined : next
      })

    const append: Service["append"] = (goalId, expectedSeq, events, state) =>
      Effect.gen(function*() {
        const payloads: Array<string> = []
        const checksums: Array<number> = []
        for (const event of events) {
          const payload = Either.try({ try: () => Event.encodeJson(event), catch: (error) => String(error) })
          if (Either.isLeft(payload)) {
            return yield* new StoreError({
              message: `goal ${goalId}: ${event._tag} at seq ${event.seq} cannot be encoded as JSON (${payload.left})`,
              goalId,
              seq: event.seq
            })
          }
          payloads.push(payload.right)
          checksums.push(checksum(payload.right))
        }
        // Appends without a State (from outside a runner) never save a snapshot.
        const snapshot = state !== undefined && events.length > 0 && snapshotDue(expectedSeq, events.length)
          ? yield* snapshotParams(goalId, expectedSeq + events.length, state)
          : undefined
        const where = `appending to goal ${goalId} at seq ${expectedSeq}`
        if (events.length > 0) echoes.sending(goalId)
        // A goal's first append (a submission) is one statement, committed on its own: a log or
        // summary row already there makes it a unique violation, as another writer's would.
        // Later ones after the summary this store wrote last are one statement too, unless the row
        // moved on meanwhile; anything else takes the goal's row lock in a transaction.
        const locking = transaction(pg, (conn) => appendIn(conn, goalId, expectedSeq, events, payloads, checksums, snapshot))
        const last = written.get(goalId)
        const oneStatement = events.length === 0 || snapshot !== undefined
          ? undefined
          : expectedSeq === 0
          ? firstAppend(goalId, events, payloads, checksums)
          : last?.nextSeq === expectedSeq
          ? Effect.flatMap(nextAppend(goalId, last, events, payloads, checksums), (next) => next === undefined ? locking : Effect.succeed(next))
          : undefined
        yield* (oneStatement === undefined ? locking : Effect.uninterruptible(oneStatement)).pipe(
          Effect.tap((next) => Effect.sync(() => remember(goalId, next))),
          Effect.onExit((exit) =>
            exit._tag === "Failure"
              ? Effect.sync(() => {
                written.delete(goalId)
                if (events.length > 0) echoes.failed(goalId)
              })
              : Effect.void
          ),
          Effect.catchIf(
            (error): error is SqlError => error._tag === "SqlError",
            (error) =>
              isUniqueViolation(error)
                // Another writer appended the goal's first events first (no summary row to lock yet).
                ? Effect.flatMap(logEnd(goalId), (actualSeq) => Effect.fail(new StateStore.AppendConflict({ goalId, expectedSeq, actualSeq })))
                : Effect.fail(failed(where, goalId, expectedSeq)(error))
          )
        )
        followers.appended(goalId, expectedSeq, events)
      })

    /** Where the goal's log ends now. */
    const logEnd = (goalId: string) =>
      rows(pg, lastSeqSql, [goalId]).pipe(
        Effect.map((found) => {
          const last = field(found[0], "last")
          return typeof last === "number" ? last + 1 : 0
        }),
        Effect.mapError(failed(`reading the end of goal ${goalId}`, goalId))
      )

    const load: Service["load"] = (goalId, fromSeq = 0) =>
      values(pg, selectEventsSql, [goalId, fromSeq]).pipe(
        Effect.mapError(failed(`loading goal ${goalId}`, goalId)),
        Effect.flatMap((found) => decodeRows(goalId, fromSeq, found))
      )

    /**
     * The events from `fromSeq` of the given kinds, and the seq after the log's last event. The end
     * is read first: every event before it is committed, so the second read misses none.
     */
    const loadTagged = (goalId: string, fromSeq: number, tags: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const found = yield* rows(pg, nextSeqSql, [goalId])
        const next = field(found[0], "next_seq")
        const end = Math.max(typeof next === "number" ? next : 0, fromSeq)
        if (end <= fromSeq || tags.length === 0) return { end, found: [] }
        return { end, found: yield* values(pg, selectTaggedSql, [goalId, fromSeq, end, tags]) }
      }).pipe(
        Effect.mapError(failed(`loading goal ${goalId}`, goalId)),
        Effect.flatMap(({ end, found }) => Effect.map(decodeRows(goalId, undefined, found), (events) => ({ events, end })))
      )

    const goal: Service["goal"] = (goalId) =>
      rows(pg, selectGoalSql, [goalId]).pipe(
        Effect.mapError(failed(`reading goal ${goalId}`, goalId)),
        Effect.flatMap((found) => (found[0] === undefined ? Effect.succeed(Option.none()) : Effect.map(decodeSummary(found[0]), Option.some)))
      )

    const goals: Service["goals"] = (q = {}) =>
      rows(pg, selectGoalsSql, [q.status ?? null, q.limit ?? null, q.parent ?? null, q.forkedFrom ?? null]).pipe(
        Effect.mapError(failed("listing goals")),
        Effect.flatMap((found) => Effect.forEach(found, decodeSummary))
      )

    /**
     * Follow the goal from `fromSeq` while the scope is open: each run of the returned Effect
     * gives the next events of `tags` kinds (all without), at least one, waiting for them.
     */
    const follow = (goalId: string, fromSeq: number, tags: ReadonlyArray<string> | undefined) =>
      // LISTEN works before the first read, so no commit of another session falls between.
      Effect.zipRight(
        listener.ready,
        followers.follow(goalId, fromSeq, tags, (cursor) =>
          tags === undefined
            ? Effect.map(load(goalId, cursor), (events) => ({ events, end: cursor + events.length }))
            // Only the kinds asked for: the query filters them.
            : loadTagged(goalId, cursor, tags))
      )

    /** The latest snapshot, if it is of this rx's State version and usable; otherwise none (fold from the start). */
    const snapshot: Service["snapshot"] = (goalId) =>
      rows(pg, selectSnapshotSql, [goalId, State.version]).pipe(
        Effect.mapError(failed(`reading the snapshot of goal ${goalId}`, goalId)),
        Effect.flatMap((found) =>
          found[0] === undefined ? Effect.succeed(Option.none()) : Either.match(usableSnapshot(goalId, found[0]), {
            onRight: (usable) => Effect.succeed(Option.some(usable)),
            onLeft: (why) =>
              Effect.as(
                Effect.logWarning(`goal ${goalId}: its snapshot at seq ${String(field(found[0], "seq"))} is not usable (${why}); its State is folded from the start`),
                Option.none()
              )
          })
        )
      )

    /** Take the lease (a new row, or one no live holder has), or say who holds it. */
    const acquire = (goalId: string) =>
      Effect.gen(function*() {
        const token = Lease.newToken()
        const taken = yield* presence.execute(Lease.acquireSql, [goalId, Lease.holder(), token, config.leaseTtlMs])
        if (taken.length > 0) return token
        const held = yield* presence.execute(Lease.holderSql, [goalId])
        const row = held[0]
        // Released between the two statements: a holder all the same, the caller may try again.
        const holder = row === undefined ? "a runner that just stopped" : `${String(field(row, "holder"))}, since ${String(field(row, "since"))}`
        return yield* new StateStore.LeaseHeld({ goalId, holder })
      }).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(failed(`taking the lease of goal ${goalId}`, goalId)(error))))

    /** Delete our row. Never fails: a failure is logged (the lease then lapses by itself). */
    const release = (goalId: string, token: string) =>
      presence.execute(Lease.releaseSql, [goalId, token]).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning(
            `releasing the lease of goal ${goalId} failed (${
              Cause.isFailType(cause) ? failed("releasing", goalId)(cause.error).message : Cause.pretty(cause)
            }); other runners can take the goal once this store's session ends or the lease expires (${config.leaseTtlMs} ms)`
          )
        )
      )

    /**
     * Every `leaseRenewMs`, push the lease's expiry on. A failed renewal is logged and retried at
     * the next; a lease taken over (it lapsed: this holder stalled or lost its session) ends the
     * renewals with a warning, and the append check stops whichever runner appends second.
     */
    const renew = (goalId: string, token: string) =>
      Effect.gen(function*() {
        while (true) {
          yield* Effect.sleep(config.leaseRenewMs)
          const renewed = yield* presence.execute(Lease.renewSql, [goalId, token, config.leaseTtlMs]).pipe(
            Effect.map((found) => found.length > 0),
            Effect.catchAllCause((cause) =>
              Effect.as(
                Effect.logWarning(`renewing the lease of goal ${goalId} failed: ${
                  Cause.isFailType(cause) ? failed("renewing", goalId)(cause.error).message : Cause.pretty(cause)
                }`),
                true
              )
            )
          )
          if (!renewed) {
            return yield* Effect.logWarning(
              `the lease of goal ${goalId} is no longer this runner's: it lapsed (no renewal within ${config.leaseTtlMs} ms, or this store's session was lost) and another runner took it; the log's append check stops whichever of the two appends second`
            )
          }
        }
      })

    const lease: Service["lease"] = (goalId) =>
      Effect.gen(function*() {
        const token = yield* Effect.acquireRelease(acquire(goalId), (token) => release(goalId, token))
        yield* Effect.forkScoped(renew(goalId, token))
      })

    /** The live holder of the goal's lease, described; none when no live holder has it. */
    const runner: Service["runner"] = (goalId) =>
      rows(pg, Lease.holderSql, [goalId]).pipe(
        Effect.mapError(failed(`reading the lease of goal ${goalId}`, goalId)),
        Effect.map((found) =>
          Option.map(Option.fromNullable(found[0]), (row) => `${String(field(row, "holder"))}, since ${String(field(row, "since"))}`)
        )
      )

    return StateStore.StateStore.of({ append, load, goal, goals, ...StateStore.followedBy(follow), snapshot, lease, runner })
  })

/** The `rx_goals` columns, named as `GoalSummary`'s fields, so a row decodes as one. */
const summaryColumns = `goal_id AS "goalId", goal, parent, forked_from AS "forkedFrom", status, iterations, next_seq AS "nextSeq", last_iteration AS "lastIteration",
  reason, suspended, approval, submitted_at AS "submittedAt", updated_at AS "updatedAt"`

const lockGoalSql = `SELECT ${summaryColumns} FROM rx_goals WHERE goal_id = $1 FOR UPDATE`
const lastSeqSql = "SELECT max(seq) AS last FROM rx_events WHERE goal_id = $1"
const nextSeqSql = "SELECT next_seq FROM rx_goals WHERE goal_id = $1"
const selectEventsSql = `SELECT ${eventColumns} FROM rx_events WHERE goal_id = $1 AND seq >= $2 ORDER BY seq`
const selectTaggedSql = `SELECT ${eventColumns} FROM rx_events
WHERE goal_id = $1 AND seq >= $2 AND seq < $3 AND tag = ANY($4::text[]) ORDER BY seq`
const selectGoalSql = `SELECT ${summaryColumns} FROM rx_goals WHERE goal_id = $1`
const selectGoalsSql = `SELECT ${summaryColumns} FROM rx_goals WHERE ($1::text IS NULL OR status = $1) AND ($3::text IS NULL OR parent = $3)
  AND ($4::text IS NULL OR (forked_from IS NOT NULL AND (forked_from::json)->>'goalId' = $4))
ORDER BY submitted_at DESC, goal_id DESC LIMIT $2::integer`
const selectSnapshotSql = "SELECT seq, state FROM rx_snapshots WHERE goal_id = $1 AND state_version = $2"
const upsertSnapshotSql = `INSERT INTO rx_snapshots (goal_id, seq, state_version, state) VALUES ($1, $2, $3, $4)
ON CONFLICT (goal_id) DO UPDATE SET seq = excluded.seq, state_version = excluded.state_version, state = excluded.state`

/**
 * The events, the goal's new summary and the notification, in one statement: $1 goal, $2 encoding
 * version, $3-$5 the events' seqs, tags and payloads, $6-$13 the summary, $14 the notification's
 * payload, $15 the events' checksums, $16-$17 why the goal waits, $18 the parent, $19 the fork's
 * origin. The events are arrays, so a batch of any size binds these 19 parameters (Postgres allows 65,535 a statement).
 */
const appendSqlWith = (onConflict: string) => `WITH inserted AS (
  INSERT INTO rx_events (goal_id, seq, tag, version, payload, checksum)
  SELECT $1, e.seq, e.tag, $2, e.payload, e.checksum
  FROM unnest($3::integer[], $4::text[], $5::text[], $15::integer[]) AS e(seq, tag, payload, checksum)
), summary AS (
  INSERT INTO rx_goals (goal_id, goal, status, iterations, next_seq, last_iteration, reason, submitted_at, updated_at, suspended, approval, parent, forked_from)
  VALUES ($1, $6, $7, $8, $9, $10, $11, $12, $13, $16, $17, $18, $19)${onConflict}
  RETURNING goal_id
)
SELECT pg_notify('${Listener.channel}', $14) FROM summary`
const appendSql = appendSqlWith(`
  ON CONFLICT (goal_id) DO UPDATE SET goal = excluded.goal, parent = excluded.parent, forked_from = excluded.forked_from, status = excluded.status, iterations = excluded.iterations,
    next_seq = excluded.next_seq, last_iteration = excluded.last_iteration, reason = excluded.reason,
    submitted_at = excluded.submitted_at, updated_at = excluded.updated_at, suspended = excluded.suspended, approval = excluded.approval`)

/**
 * `appendSql` for a goal's first events: the summary row is inserted, never updated, so a goal
 * that has one already (or events: the events' key) fails the statement as a unique violation,
 * and nothing of it is written.
 */
const firstAppendSql = appendSqlWith("")

/**
 * The events after the summary row as its writer last wrote it, in one statement: the row moved
 * on (only where it is still at $16, the expected seq), the events inserted only if it was, the
 * notification sent. No row returned: the row had moved on, and nothing was written. $1 goal,
 * $2 encoding version, $3-$6 the events' seqs, tags, payloads and checksums, $7-$14 the summary's
 * changing columns, $15 the notification's payload.
 */
const advanceSql = `WITH summary AS (
  UPDATE rx_goals SET status = $7, iterations = $8, next_seq = $9, last_iteration = $10, reason = $11, updated_at = $12,
    suspended = $13, approval = $14
  WHERE goal_id = $1 AND next_seq = $16
  RETURNING goal_id
), inserted AS (
  INSERT INTO rx_events (goal_id, seq, tag, version, payload, checksum)
  SELECT $1, e.seq, e.tag, $2, e.payload, e.checksum
  FROM unnest($3::integer[], $4::text[], $5::text[], $6::integer[]) AS e(seq, tag, payload, checksum)
  WHERE EXISTS (SELECT 1 FROM summary)
)
SELECT pg_notify('${Listener.channel}', $15) FROM summary`

/** Goals whose summary row is kept in memory between appends. */
const maxCachedSummaries = 256

/** `appendSql`'s (and `firstAppendSql`'s) parameters: the events, and the goal's summary after them. */
const appendParams = (
  goalId: string,
  events: ReadonlyArray<Event.Event>,
  payloads: ReadonlyArray<string>,
  checksums: ReadonlyArray<number>,
  next: GoalSummary.GoalSummary
): ReadonlyArray<unknown> => [
  goalId,
  Event.version,
  events.map((e) => e.seq),
  events.map((e) => e._tag),
  payloads,
  ...summaryParams(next),
  Listener.payloadOf(goalId),
  checksums,
  ...Migrations.waitingParams(next),
  next.parent,
  Migrations.forkedFromParam(next.forkedFrom)
]

/** A summary's columns after `goal_id`, in `appendSql`'s order ($6-$13). */
const summaryParams = (s: GoalSummary.GoalSummary): ReadonlyArray<unknown> =>
  [s.goal, s.status, s.iterations, s.nextSeq, s.lastIteration, s.reason, s.submittedAt, s.updatedAt]

const decodeSummaryEither = Schema.decodeUnknownEither(GoalSummary.Stored)

/** A `rx_goals` row (selected with `summaryColumns`) as a `GoalSummary`; one that does not decode is an error naming the goal. */
const decodeSummary = (row: unknown): Effect.Effect<GoalSummary.GoalSummary, StoreError> =>
  Effect.mapError(decodeSummaryEither(row), (error) => {
    const goalId = field(row, "goalId")
    const message = `its rx_goals row does not decode: ${error.message}`
    return typeof goalId === "string" ? corrupt(goalId, Number(field(row, "nextSeq")), message) : new StoreError({ message: `a goal: ${message}` })
  })

const decodeStateJson = Schema.decodeUnknownEither(Schema.parseJson(State.State))

/** A snapshot row as the goal's Snapshot, or why it is not one (does not decode, or is another goal's or seq's State). */
const usableSnapshot = (goalId: string, row: unknown): Either.Either<StateStore.Snapshot, string> =>
  Either.flatMap(Either.mapLeft(decodeStateJson(field(row, "state")), (error) => error.message), (state) =>
    state.goalId === goalId && state.seq === field(row, "seq")
      ? Either.right({ seq: state.seq, state })
      : Either.left(`it holds goal ${state.goalId}'s State at seq ${state.seq}`))
const encodeStateJson = Schema.encodeEither(Schema.parseJson(State.State))
