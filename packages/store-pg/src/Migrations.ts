/**
 * The schema of an rx log in Postgres, created and upgraded through @effect/sql's Migrator. Stores
 * opening the same database at once, from any host, take turns: the migration runs under a
 * session advisory lock, so exactly one of them applies each migration and the others see it done.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { GoalSummary, StateStore } from "@rx/kernel"
import { decodeRows, eventColumns } from "./internal/codec.js"
import { DatabaseRefused, toStoreError } from "./internal/errors.js"
import { reserve } from "./internal/sql.js"

/** The table where the Migrator records applied migrations. */
export const table = "rx_migrations"

/** The advisory lock key migrations run under ("rxmg"). */
export const lockKey = 0x72786d67

const createLog = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // One row per event: the event's JSON (its Schema's encoding) with the encoding version. `tag`
  // lets `changes` read only the kinds it is asked for.
  yield* sql`CREATE TABLE rx_events (
    goal_id text COLLATE "C" NOT NULL,
    seq integer NOT NULL,
    tag text NOT NULL,
    version integer NOT NULL,
    payload text NOT NULL,
    PRIMARY KEY (goal_id, seq)
  )`
  // One row per goal, updated in the append's transaction; its row lock orders a goal's appends
  // and `next_seq` is the log's end.
  yield* sql`CREATE TABLE rx_goals (
    goal_id text COLLATE "C" PRIMARY KEY,
    goal text NOT NULL,
    status text NOT NULL,
    iterations integer NOT NULL,
    next_seq integer NOT NULL,
    last_iteration integer NOT NULL,
    reason text,
    submitted_at double precision NOT NULL,
    updated_at double precision NOT NULL
  )`
  yield* sql`CREATE INDEX rx_goals_newest ON rx_goals (submitted_at DESC, goal_id DESC)`
  // The latest State the runner handed, with the State encoding's version.
  yield* sql`CREATE TABLE rx_snapshots (
    goal_id text COLLATE "C" PRIMARY KEY,
    seq integer NOT NULL,
    state_version integer NOT NULL,
    state text NOT NULL
  )`
  // Who runs each goal: the holder's description, a token unique to the lease, the database
  // session (backend pid) that holds it, and when it expires (the database's clock).
  yield* sql`CREATE TABLE rx_leases (
    goal_id text COLLATE "C" PRIMARY KEY,
    holder text NOT NULL,
    token text NOT NULL,
    session_pid integer NOT NULL,
    acquired_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
  )`
})

const addChecksum = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // CRC-32 of each row's payload (`internal/checksum.ts`), checked on every read. Rows written
  // before this column have none (NULL) and are read as before; none is rewritten.
  yield* sql`ALTER TABLE rx_events ADD COLUMN checksum integer`
})

const addGoalWaiting = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Why an open goal waits (`GoalSummary.suspended`, `approval`), as JSON; NULL when nothing waits.
  yield* sql`ALTER TABLE rx_goals ADD COLUMN suspended text, ADD COLUMN approval text`
  // Open goals' rows are filled from their logs: only the tail from the last event that can set them is read.
  const open = yield* sql<{ readonly goal_id: string; readonly suspended: number | null; readonly approval: number | null }>`
    SELECT g.goal_id,
      (SELECT max(seq) FROM rx_events e WHERE e.goal_id = g.goal_id AND e.tag = 'Suspended') AS suspended,
      (SELECT max(seq) FROM rx_events e WHERE e.goal_id = g.goal_id AND e.tag = 'ApprovalRequested') AS approval
    FROM rx_goals g WHERE g.status = 'open'`
  for (const row of open) {
    const seqs = [row.suspended, row.approval].filter((seq): seq is number => seq !== null)
    if (seqs.length === 0) continue
    const from = Math.min(...seqs)
    const rows = yield* sql.unsafe(`SELECT ${eventColumns} FROM rx_events WHERE goal_id = $1 AND seq >= $2 ORDER BY seq`, [row.goal_id, from]).values
    // A log that does not decode is left saying nothing waits: reading it fails loudly anyway.
    const waiting = yield* Effect.orElseSucceed(Effect.map(decodeRows(row.goal_id, from, rows), GoalSummary.waitingOf), () => GoalSummary.notWaiting)
    yield* sql.unsafe("UPDATE rx_goals SET suspended = $1, approval = $2 WHERE goal_id = $3", [...waitingParams(waiting), row.goal_id])
  }
})

const addGoalParent = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // A sub-goal's parent (`GoalSummary.parent`), and an index to list a goal's sub-goals. No goal
  // before this migration has one: only an rx that writes this schema records sub-goals.
  yield* sql`ALTER TABLE rx_goals ADD COLUMN parent text`
  yield* sql`CREATE INDEX rx_goals_parent ON rx_goals (parent, submitted_at DESC, goal_id DESC) WHERE parent IS NOT NULL`
})

const addGoalFork = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Where a fork was forked from (`GoalSummary.forkedFrom`), as JSON; NULL for any other goal. An
  // index on its goal lists a goal's forks. The rx before this column already wrote forks: their
  // rows are filled from their first events, the only ones that can name an origin.
  yield* sql`ALTER TABLE rx_goals ADD COLUMN forked_from text`
  yield* sql`CREATE INDEX rx_goals_forked_from ON rx_goals (((forked_from::json)->>'goalId'), submitted_at DESC, goal_id DESC) WHERE forked_from IS NOT NULL`
  const forks = yield* sql<{ readonly goal_id: string }>`
    SELECT goal_id FROM rx_events WHERE seq = 0 AND tag = 'GoalSubmitted' AND strpos(payload, '"forkedFrom"') > 0`
  for (const { goal_id: goalId } of forks) {
    const rows = yield* sql.unsafe(`SELECT ${eventColumns} FROM rx_events WHERE goal_id = $1 AND seq = 0`, [goalId]).values
    // A first event that does not decode is left unlinked: reading it fails loudly anyway.
    const first = yield* Effect.orElseSucceed(Effect.map(decodeRows(goalId, 0, rows), (events) => events[0]), () => undefined)
    if (first?._tag !== "GoalSubmitted" || first.forkedFrom === undefined) continue
    yield* sql.unsafe("UPDATE rx_goals SET forked_from = $1 WHERE goal_id = $2", [forkedFromParam(first.forkedFrom), goalId])
  }
})

/** The `forked_from` column of a summary. */
export const forkedFromParam = (forkedFrom: GoalSummary.GoalSummary["forkedFrom"]): string | null =>
  forkedFrom === null ? null : JSON.stringify({ goalId: forkedFrom.goalId, iteration: forkedFrom.iteration })

/** The `suspended` and `approval` columns of a summary. */
export const waitingParams = (waiting: GoalSummary.Waiting): [string | null, string | null] => [
  waiting.suspended === null ? null : JSON.stringify(waiting.suspended),
  waiting.approval === null ? null : JSON.stringify(waiting.approval)
]

/** Every migration, by `<id>_<name>`. */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_create_log": createLog,
  "0002_event_checksum": addChecksum,
  "0003_goal_waiting": addGoalWaiting,
  "0004_goal_parent": addGoalParent,
  "0005_goal_fork": addGoalFork
}

/** The schema version this rx writes: the highest migration id. */
export const latest = 5

/** The tables each schema version has; one missing means the database was damaged. */
const tables = ["rx_events", "rx_goals", "rx_snapshots", "rx_leases"]

const migrate = Migrator.make({})

const version = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const exists = yield* sql<{ readonly found: string | null }>`SELECT to_regclass(${table})::text AS found`
    if (exists[0]?.found == null) return 0
    const rows = yield* sql<{ readonly id: number | null }>`SELECT max(migration_id) AS id FROM ${sql(table)}`
    return rows[0]?.id ?? 0
  })

/**
 * Bring the database to this rx's schema and return its version. A database at a newer version,
 * or one missing tables its version has, is refused untouched. Runs under a session advisory lock
 * held on a connection of its own, so concurrent openers wait for each other.
 */
export const run = (sql: SqlClient.SqlClient, database: string): Effect.Effect<number, StateStore.StoreError | DatabaseRefused> =>
  Effect.scoped(Effect.gen(function*() {
    const conn = yield* reserve(sql)
    yield* Effect.acquireRelease(
      conn.execute("SELECT pg_advisory_lock($1)", [lockKey], undefined),
      () => Effect.ignore(conn.execute("SELECT pg_advisory_unlock($1)", [lockKey], undefined))
    )
    const current = yield* version(sql)
    if (current > latest) {
      return yield* new DatabaseRefused({
        database,
        reason: "newer",
        message: `${database} holds an rx log of schema version ${current}, written by a newer rx; this rx reads up to version ${latest}: upgrade rx`
      })
    }
    if (current < latest) {
      yield* migrate({ loader: Migrator.fromRecord(migrations), table }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    }
    const present = yield* sql<{ readonly name: string }>`SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()`
    const names = new Set(present.map((row) => row.name))
    const missing = tables.filter((name) => !names.has(name))
    if (missing.length > 0) {
      return yield* new DatabaseRefused({
        database,
        reason: "damaged",
        message: `${database} is an rx log (schema version ${current}) missing ${missing.join(", ")}; rx will not recreate tables over a damaged log: restore the database from a backup`
      })
    }
    return yield* version(sql)
  })).pipe(
    Effect.catchTags({
      SqlError: (error) => Effect.fail(toStoreError({ database, what: `migrating ${database}` }, error)),
      MigrationError: (error) => Effect.fail(toStoreError({ database, what: `migrating ${database}` }, error))
    }),
    Effect.catchAllDefect((defect) => Effect.fail(toStoreError({ database, what: `migrating ${database}` }, defect)))
  )
