/**
 * The schema of an rx database, created and upgraded through @effect/sql's Migrator inside one
 * `BEGIN IMMEDIATE` transaction, so processes opening the same file at once never race.
 * A file that is not an rx database, or has a newer schema, is refused and left untouched.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { GoalSummary, StateStore } from "@rx/kernel"
import { checksumColumnSince, decodeRows, eventColumns } from "./internal/codec.js"
import { DatabaseRefused, toStoreError } from "./internal/errors.js"
import { connection, field, immediate, query } from "./internal/sql.js"
import type { Connection } from "@effect/sql/SqlConnection"

/** The table where the Migrator records applied migrations; its presence marks an rx database. */
export const table = "rx_migrations"

const createLog = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // One row per event: the event as JSON (its Schema's encoding), with the encoding version.
  // `tag` lets `changes` read only the kinds it is asked for.
  yield* sql`CREATE TABLE events (
    goal_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    tag TEXT NOT NULL,
    version INTEGER NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (goal_id, seq)
  )`
  // One row per goal, maintained in the append's transaction with GoalSummary.update.
  yield* sql`CREATE TABLE goals (
    goal_id TEXT PRIMARY KEY NOT NULL,
    goal TEXT NOT NULL,
    status TEXT NOT NULL,
    iterations INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    last_iteration INTEGER NOT NULL,
    reason TEXT,
    submitted_at REAL NOT NULL,
    updated_at REAL NOT NULL
  )`
  yield* sql`CREATE INDEX goals_newest ON goals (submitted_at DESC, goal_id DESC)`
  // The latest folded State of a goal, with the State encoding's version.
  yield* sql`CREATE TABLE snapshots (
    goal_id TEXT PRIMARY KEY NOT NULL,
    seq INTEGER NOT NULL,
    state_version INTEGER NOT NULL,
    state TEXT NOT NULL
  )`
})

const createLeases = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Who runs each goal: one row per held lease (or one left by a holder that died), its
  // holder's host and pid, a token unique to the lease, and times in epoch milliseconds.
  yield* sql`CREATE TABLE leases (
    goal_id TEXT PRIMARY KEY NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    token TEXT NOT NULL,
    acquired_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
  )`
})

const addPayloadFormat = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // How each row's payload is written (1: the full event JSON, 2: slim, without the _tag, goal_id
  // and seq the columns hold); the decoder goes by it. Rows before this column are slim: rx 0.1
  // wrote them so. The default fills them without rewriting a row; every insert names its format.
  yield* sql`ALTER TABLE events ADD COLUMN format INTEGER NOT NULL DEFAULT 2`
})

const addChecksum = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // CRC-32 of each row's payload (`internal/checksum.ts`), checked on every read and by Doctor.
  // Rows written before this column have none (NULL) and are read as before; none is rewritten.
  yield* sql`ALTER TABLE events ADD COLUMN checksum INTEGER`
})

const addGoalWaiting = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Why an open goal waits (`GoalSummary.suspended`, `approval`), as JSON; NULL when nothing waits.
  yield* sql`ALTER TABLE goals ADD COLUMN suspended TEXT`
  yield* sql`ALTER TABLE goals ADD COLUMN approval TEXT`
  // Open goals' rows are filled from their logs: only the tail from the last event that can set them is read.
  const open = yield* sql<{ readonly goal_id: string }>`SELECT goal_id FROM goals WHERE status = 'open'`
  for (const { goal_id: goalId } of open) {
    const from = tailFrom(yield* sql.unsafe(waitingTailSql, [goalId]))
    if (from === undefined) continue
    const rows = yield* sql.unsafe(`SELECT ${eventColumns(checksumColumnSince)} FROM events WHERE goal_id = ? AND seq >= ? ORDER BY seq`, [goalId, from]).values
    // A log that does not decode is left saying nothing waits: reading it fails loudly anyway, and Doctor names the row.
    const waiting = yield* Effect.orElseSucceed(Effect.map(decodeRows(goalId, from, rows), GoalSummary.waitingOf), () => GoalSummary.notWaiting)
    yield* sql.unsafe("UPDATE goals SET suspended = ?, approval = ? WHERE goal_id = ?", [...waitingParams(waiting), goalId])
  }
})

const addGoalParent = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // A sub-goal's parent (`GoalSummary.parent`), and an index to list a goal's sub-goals. No goal
  // before this migration has one: only an rx that writes this schema records sub-goals.
  yield* sql`ALTER TABLE goals ADD COLUMN parent TEXT`
  yield* sql`CREATE INDEX goals_parent ON goals (parent, submitted_at DESC, goal_id DESC) WHERE parent IS NOT NULL`
})

const addGoalFork = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Where a fork was forked from (`GoalSummary.forkedFrom`), as JSON; NULL for any other goal. An
  // index on its goal lists a goal's forks. The rx before this column already wrote forks: their
  // rows are filled from their first events, the only ones that can name an origin.
  yield* sql`ALTER TABLE goals ADD COLUMN forked_from TEXT`
  yield* sql`CREATE INDEX goals_forked_from ON goals (json_extract(forked_from, '$.goalId'), submitted_at DESC, goal_id DESC) WHERE forked_from IS NOT NULL`
  const forks = yield* sql<{ readonly goal_id: string }>`SELECT goal_id FROM events WHERE seq = 0 AND tag = 'GoalSubmitted' AND instr(payload, '"forkedFrom"') > 0`
  for (const { goal_id: goalId } of forks) {
    const rows = yield* sql.unsafe(`SELECT ${eventColumns(checksumColumnSince)} FROM events WHERE goal_id = ? AND seq = 0`, [goalId]).values
    // A first event that does not decode is left unlinked: reading it fails loudly anyway, and Doctor names the row.
    const first = yield* Effect.orElseSucceed(Effect.map(decodeRows(goalId, 0, rows), (events) => events[0]), () => undefined)
    if (first?._tag !== "GoalSubmitted" || first.forkedFrom === undefined) continue
    yield* sql.unsafe("UPDATE goals SET forked_from = ? WHERE goal_id = ?", [forkedFromParam(first.forkedFrom), goalId])
  }
})

/** The `forked_from` column of a summary. */
export const forkedFromParam = (forkedFrom: GoalSummary.GoalSummary["forkedFrom"]): string | null =>
  forkedFrom === null ? null : JSON.stringify({ goalId: forkedFrom.goalId, iteration: forkedFrom.iteration })

/** The last `Suspended` and `ApprovalRequested` of a goal: why it waits is in its log from the earlier of the two. */
export const waitingTailSql =
  "SELECT max(CASE WHEN tag = 'Suspended' THEN seq END) AS suspended, max(CASE WHEN tag = 'ApprovalRequested' THEN seq END) AS approval FROM events WHERE goal_id = ?"

/** Where the tail `waitingTailSql` found starts; undefined when the goal never waited. */
export const tailFrom = (rows: ReadonlyArray<unknown>): number | undefined => {
  const seqs = [field(rows[0], "suspended"), field(rows[0], "approval")].filter((seq): seq is number => typeof seq === "number")
  return seqs.length === 0 ? undefined : Math.min(...seqs)
}

/** The `suspended` and `approval` columns of a summary. */
export const waitingParams = (waiting: GoalSummary.Waiting): [string | null, string | null] => [
  waiting.suspended === null ? null : JSON.stringify(waiting.suspended),
  waiting.approval === null ? null : JSON.stringify(waiting.approval)
]

/** Every migration, by `<id>_<name>`. */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_create_log": createLog,
  "0002_create_leases": createLeases,
  "0003_payload_format": addPayloadFormat,
  "0004_event_checksum": addChecksum,
  "0005_goal_waiting": addGoalWaiting,
  "0006_goal_parent": addGoalParent,
  "0007_goal_fork": addGoalFork
}

/** The schema version this rx writes: the highest migration id. */
export const latest = 7

/** The schema version that added the `goals` columns saying why an open goal waits. */
export const waitingColumnsSince = 5

/** The schema version that added the `goals` column naming a sub-goal's parent. */
export const parentColumnSince = 6

/** The schema version that added the `goals` column saying where a fork was forked from. */
export const forkColumnSince = 7

/**
 * The oldest schema a read-only store reads as is: later migrations added a table reading does not
 * use (`leases`), the `format` column, whose value rows of older schemas all have (2, slim), and
 * the `checksum` column, which older rows lack anyway, so reads supply both, and the `goals`
 * columns saying why an open goal waits, which reads fill from the log, and the parent column, which
 * no goal of an older schema has, and the fork column, which reads fill from a goal's first event. Raise it with a
 * migration whose effect reads cannot supply.
 */
export const readableFrom = 1

/**
 * The `application_id` in the header of a database this rx created or migrated ("rxlg"), so
 * `file(1)` and rx tell an rx log from another program's SQLite file. Files migrated by an
 * older rx have 0 and are recognised by their tables.
 */
export const applicationId = 0x72786c67

/** The tables each schema version has; one missing means the file was damaged. */
const tablesOf = (version: number): ReadonlyArray<string> =>
  version >= 2 ? ["events", "goals", "snapshots", "leases"] : ["events", "goals", "snapshots"]

const migrate = Migrator.make({})

const refused = (filename: string, reason: DatabaseRefused["reason"], message: string) =>
  new DatabaseRefused({ filename, reason, message })

/**
 * The applied schema version of the database on `conn` (0 when it has no tables yet), or why it
 * is refused: another program's application id, tables that are not rx's, a newer schema, or
 * rx tables missing.
 */
const inspect = (conn: Connection, filename: string) =>
  Effect.gen(function*() {
    const id = Number(field((yield* query(conn, "PRAGMA application_id"))[0], "application_id") ?? 0)
    if (id !== 0 && id !== applicationId) {
      return yield* refused(
        filename,
        "foreign",
        `${filename} is another program's SQLite database (application_id 0x${id.toString(16)}), not an rx log; rx will not touch it: choose another file`
      )
    }
    const names = (yield* query(conn, "SELECT name FROM sqlite_master WHERE type = 'table'")).map((row) => String(field(row, "name")))
    if (names.length === 0) return 0
    if (!names.includes(table)) {
      return yield* refused(
        filename,
        "foreign",
        `${filename} is a SQLite database but not an rx log (it has tables ${names.join(", ")} and no ${table}); rx will not touch it: choose another file`
      )
    }
    const rows = yield* query(conn, `SELECT max(migration_id) AS id FROM ${table}`)
    const current = Number(field(rows[0], "id") ?? 0)
    if (current > latest) {
      return yield* refused(
        filename,
        "newer",
        `${filename} has schema version ${current}, written by a newer rx; this rx reads up to version ${latest}: upgrade rx`
      )
    }
    const missing = tablesOf(current).filter((name) => !names.includes(name))
    if (missing.length > 0) {
      return yield* refused(
        filename,
        "damaged",
        `${filename} is an rx log (schema version ${current}) missing its table${missing.length === 1 ? "" : "s"} ${missing.join(", ")}; rx will not recreate ${missing.length === 1 ? "it" : "them"} over a damaged log: restore the file from a backup`
      )
    }
    return current
  })

/** A database with no tables where an existing rx log was expected. */
const emptySchema = (filename: string) =>
  refused(
    filename,
    "foreign",
    `${filename} is a SQLite database with no tables, not an rx log; rx creates a log only where no file exists: remove it or choose another file`
  )

/**
 * Check the database is an rx log this rx reads, and, unless read-only, bring it to this rx's
 * schema: the schema version it is at then. A database with no tables is initialised only with
 * `create` (a file the store just created); otherwise it is refused, as is anything that is not an
 * rx log. The writable check and migration are one `BEGIN IMMEDIATE` transaction over the
 * Migrator's Effects, on a connection no one else uses yet.
 */
export const run = (
  client: SqlClient.SqlClient,
  options: { readonly filename: string; readonly busyTimeoutMs: number; readonly readonly: boolean; readonly create: boolean }
): Effect.Effect<number, StateStore.StoreError | DatabaseRefused> => {
  const { filename } = options
  const failed = (error: unknown) => toStoreError({ ...options, what: `opening ${filename}` }, error)
  if (options.readonly) {
    return Effect.flatMap(connection(client), (conn) => inspect(conn, filename)).pipe(
      Effect.catchTag("SqlError", (error) => Effect.fail(failed(error))),
      Effect.flatMap((current) =>
        current >= readableFrom ? Effect.succeed(current) : Effect.fail(
          current === 0
            ? emptySchema(filename)
            : refused(filename, "outdated", `${filename} has schema version ${current} and needs migrating to ${latest}; open it once without readonly`)
        )
      )
    )
  }
  return Effect.flatMap(connection(client), (conn) =>
    immediate(conn, Effect.gen(function*() {
      const current = yield* inspect(conn, filename)
      if (current === latest) return latest
      if (current === 0 && !options.create) return yield* emptySchema(filename)
      yield* migrate({ loader: Migrator.fromRecord(migrations), table }).pipe(
        Effect.provideService(SqlClient.TransactionConnection, [conn, 0]),
        Effect.provideService(SqlClient.SqlClient, client)
      )
      yield* query(conn, `PRAGMA application_id = ${applicationId}`)
      const after = yield* inspect(conn, filename)
      if (after !== latest) {
        return yield* new StateStore.StoreError({ message: `${filename}: migrating to schema version ${latest} left version ${after}` })
      }
      return after
    })
  )).pipe(
    Effect.catchTags({
      SqlError: (error) => Effect.fail(failed(error)),
      MigrationError: (error) => Effect.fail(failed(error))
    }),
    Effect.catchAllDefect((defect) => Effect.fail(failed(defect)))
  )
}
