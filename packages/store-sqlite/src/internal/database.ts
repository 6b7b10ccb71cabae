/**
 * The SQLite connection a store owns (one better-sqlite3 handle) and the one way the store runs
 * statements on it: an operation is a synchronous function over the handle, run to its end inside
 * `Effect.suspend`, in the caller's fiber.
 *
 * - `write(body)`: `BEGIN IMMEDIATE` (the write lock first, waiting up to the busy timeout), the
 *   body, `COMMIT`. The body returns an `Either`: a `Left`, or a statement that fails, rolls the
 *   transaction back and fails the Effect. `read(body)` runs statements with no transaction (each
 *   sees the latest commit); `readConsistent(body)` runs them in one read transaction.
 * - better-sqlite3 runs every statement synchronously and the body cannot suspend, so no other
 *   fiber runs a statement on the handle in the middle of an operation, without any lock; and
 *   since the operation runs in the caller's fiber, the caller's logger, tracer, clock and fiber
 *   refs stay in force around it.
 * - `sql` is an @effect/sql client over the same handle (the Migrator; statements of one's own).
 *   It serializes its statements and transactions through its semaphore, like
 *   @effect/sql-sqlite-node's client. An operation that finds a transaction open on the handle (one
 *   held through `sql` across asynchronous steps) waits for that semaphore, and fails if the
 *   transaction is still open then (it was not begun through the client), rather than run inside
 *   someone else's transaction.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import Sqlite from "better-sqlite3"
import { Effect, Either, Scope, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** Statements inside an operation. Each runs synchronously; a failing one ends the operation. */
export interface Tx {
  /** The rows of a statement. */
  readonly all: (sql: string, params?: ReadonlyArray<unknown>) => ReadonlyArray<unknown>
  /** The rows of a statement as arrays of column values (in the order selected): cheaper than objects. */
  readonly values: (sql: string, params?: ReadonlyArray<unknown>) => ReadonlyArray<ReadonlyArray<unknown>>
  /** The first row of a statement, if any. */
  readonly get: (sql: string, params?: ReadonlyArray<unknown>) => unknown
  /** Run a statement that returns no rows: how many rows it changed. */
  readonly run: (sql: string, params?: ReadonlyArray<unknown>) => number
}

/** An operation's body: its result, or a failure that rolls a `write` back. */
export type Body<A, E> = (tx: Tx) => Either.Either<A, E>

export interface Database {
  readonly filename: string
  /** Statements with no transaction around them: each sees the latest commit. */
  readonly read: <A, E = never>(body: Body<A, E>) => Effect.Effect<A, E | SqlError>
  /** Statements in one read transaction: all see the same commit. */
  readonly readConsistent: <A, E = never>(body: Body<A, E>) => Effect.Effect<A, E | SqlError>
  /** Statements in one `BEGIN IMMEDIATE` transaction, committed unless the body fails. */
  readonly write: <A, E = never>(body: Body<A, E>) => Effect.Effect<A, E | SqlError>
  /** An @effect/sql client over the same handle. */
  readonly sql: SqlClient.SqlClient
}

export interface Options {
  readonly filename: string
  readonly readonly: boolean
  /** Refuse to create the file (the caller checked it exists). */
  readonly fileMustExist: boolean
  readonly busyTimeoutMs: number
  readonly synchronous?: "FULL" | "NORMAL" | undefined
}

/** A failure of a statement: SQLite's errors are failures; anything else (a bug) is a defect. */
const failure = (cause: unknown, message: string): Effect.Effect<never, SqlError> =>
  cause instanceof Sqlite.SqliteError ? Effect.fail(new SqlError({ cause, message })) : Effect.die(cause)

const attempt = <A>(f: () => A): Either.Either<A, unknown> => Either.try({ try: f, catch: (cause) => cause })

/**
 * Open `filename`; the handle closes with the scope. A read-only open that SQLite cannot make in
 * place (a WAL log in a folder this user cannot write, with no `-shm` file beside it to share) reads
 * a private copy instead (see `readCopy`), and says so once as an info log.
 */
export const open = (options: Options): Effect.Effect<Database, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const opened = attempt(() =>
      new Sqlite(options.filename, {
        readonly: options.readonly,
        fileMustExist: options.fileMustExist,
        timeout: options.busyTimeoutMs
      })
    )
    if (Either.isLeft(opened)) {
      // better-sqlite3 reports a missing folder as a TypeError: a failure to open, not a bug.
      return yield* Effect.fail(new SqlError({ cause: opened.left, message: `Failed to open ${options.filename}` }))
    }
    let handle = opened.right
    if (options.readonly) {
      // SQLite opens a WAL database lazily: the first read is where a read-only folder shows.
      const first = attempt(() => handle.prepare("SELECT count(*) FROM sqlite_schema").get())
      if (Either.isLeft(first) && cannotReadInPlace(first.left)) {
        handle.close()
        const copy = yield* readCopy(options.filename, options.busyTimeoutMs)
        handle = copy.handle
        yield* noteCopy(options.filename, copy.wal)
      }
    }
    const open = handle
    yield* Effect.addFinalizer(() => Effect.sync(() => open.close()))
    if (options.synchronous !== undefined) {
      const set = attempt(() => handle.pragma(`synchronous = ${options.synchronous}`))
      if (Either.isLeft(set)) return yield* failure(set.left, "Failed to set synchronous")
    }
    return yield* make(handle, options.filename)
  })

interface Copy {
  readonly handle: Sqlite.Database
  readonly wal: boolean
}

/** The SQLite errors of a read-only open that needs to write beside the file (its `-shm` index). */
const cannotReadInPlace = (cause: unknown): boolean =>
  cause instanceof Sqlite.SqliteError &&
  (cause.code === "SQLITE_READONLY_DIRECTORY" || cause.code === "SQLITE_CANTOPEN" || cause.code.startsWith("SQLITE_READONLY_CANT"))

/** The files whose notes were said in this process: a command that opens a log several times says it once. */
const noted = new Set<string>()

const noteCopy = (filename: string, wal: boolean) =>
  Effect.suspend(() => {
    if (noted.has(filename)) return Effect.void
    noted.add(filename)
    return Effect.logInfo(
      `${filename} is read from a private copy${wal ? " (with its -wal file)" : ""}: its folder is not writable here, so SQLite cannot read it in place; nothing is written beside it`
    )
  })

/** A file's size and modification time, to tell whether it changed while it was copied. */
const stamp = (file: string): string => {
  const stat = fs.statSync(file, { throwIfNoEntry: false })
  return stat === undefined ? "none" : `${stat.size}:${stat.mtimeMs}`
}

/**
 * Copy `filename`, and its `-wal` file when there is one, into a new private folder (0700) and
 * open the copy read-only; the folder is removed with the scope. The copy holds every committed
 * transaction: SQLite rebuilds the WAL's index from the copied `-wal` file, whose frames are
 * checksummed, so only whole commits count. (SQLite's `immutable` opening would skip the `-wal`
 * file and miss its commits.) The `-shm` file is never copied: it is shared memory, rebuilt from the
 * WAL. A copy made while another process wrote the files is made again.
 */
const readCopy = (filename: string, busyTimeoutMs: number): Effect.Effect<Copy, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const failed = (cause: unknown) => new SqlError({ cause, message: `Failed to read a copy of ${filename}` })
    const dir = yield* Effect.acquireRelease(
      Effect.try({ try: () => fs.mkdtempSync(path.join(os.tmpdir(), "rx-read-")), catch: failed }),
      (dir) => Effect.sync(() => Either.try(() => fs.rmSync(dir, { recursive: true, force: true })))
    )
    const copy = path.join(dir, path.basename(filename))
    for (let attempt_ = 0; attempt_ < 5; attempt_++) {
      const copied = attempt(() => {
        const before = `${stamp(filename)}/${stamp(`${filename}-wal`)}`
        for (const suffix of ["-wal", "-shm", ""]) fs.rmSync(`${copy}${suffix}`, { force: true })
        fs.copyFileSync(filename, copy)
        const wal = (fs.statSync(`${filename}-wal`, { throwIfNoEntry: false })?.size ?? 0) > 0
        if (wal) fs.copyFileSync(`${filename}-wal`, `${copy}-wal`)
        return { wal, steady: before === `${stamp(filename)}/${stamp(`${filename}-wal`)}` }
      })
      if (Either.isLeft(copied)) return yield* Effect.fail(failed(copied.left))
      if (!copied.right.steady) continue
      const handle = attempt(() => new Sqlite(copy, { readonly: true, fileMustExist: true, timeout: busyTimeoutMs }))
      if (Either.isLeft(handle)) return yield* Effect.fail(failed(handle.left))
      const first = attempt(() => handle.right.prepare("SELECT count(*) FROM sqlite_schema").get())
      if (Either.isLeft(first)) {
        handle.right.close()
        return yield* failure(first.left, `Failed to read a copy of ${filename}`)
      }
      return { handle: handle.right, wal: copied.right.wal }
    }
    return yield* Effect.fail(
      new SqlError({ message: `${filename} kept changing while rx copied it to read it (another process is writing it); try again` })
    )
  })

const make = (handle: Sqlite.Database, filename: string): Effect.Effect<Database> =>
  Effect.gen(function*() {
    const statements = new Map<string, Sqlite.Statement>()
    const prepared = (sql: string): Sqlite.Statement => {
      const cached = statements.get(sql)
      if (cached !== undefined) return cached
      const statement = handle.prepare(sql)
      statements.set(sql, statement)
      return statement
    }
    const rawStatements = new Map<string, Sqlite.Statement>()
    const preparedRaw = (sql: string): Sqlite.Statement => {
      const cached = rawStatements.get(sql)
      if (cached !== undefined) return cached
      const statement = handle.prepare(sql).raw(true)
      rawStatements.set(sql, statement)
      return statement
    }
    const tx: Tx = {
      all: (sql, params = []) => prepared(sql).all(...params),
      values: (sql, params = []) => preparedRaw(sql).all(...params) as ReadonlyArray<ReadonlyArray<unknown>>,
      get: (sql, params = []) => prepared(sql).get(...params),
      run: (sql, params = []) => prepared(sql).run(...params).changes
    }
    const rollback = () => {
      if (handle.inTransaction) attempt(() => prepared("ROLLBACK").run())
    }

    /** Run `body` to its end now, inside `begin` ... `end` when given. */
    const runNow = <A, E>(body: Body<A, E>, begin: string | undefined, end: string): Effect.Effect<A, E | SqlError> => {
      if (begin !== undefined) {
        const begun = attempt(() => prepared(begin).run())
        if (Either.isLeft(begun)) return failure(begun.left, "Failed to begin a transaction")
      }
      const result = attempt(() => body(tx))
      if (Either.isLeft(result)) {
        if (begin !== undefined) rollback()
        return failure(result.left, "Failed to execute statement")
      }
      if (Either.isLeft(result.right)) {
        if (begin !== undefined) rollback()
        return Effect.fail(result.right.left)
      }
      if (begin !== undefined) {
        const ended = attempt(() => prepared(end).run())
        if (Either.isLeft(ended)) {
          // A failed COMMIT may leave the transaction open (or SQLite may have rolled it back).
          rollback()
          return failure(ended.left, "Failed to commit")
        }
      }
      return Effect.succeed(result.right.right)
    }

    const semaphore = yield* Effect.makeSemaphore(1)
    const busy = new SqlError({
      message: `a transaction is open on the store's connection to ${filename}, not begun through its SqlClient; the store does not run inside it`
    })
    const operation = (begin: string | undefined, end: string) => <A, E>(body: Body<A, E>): Effect.Effect<A, E | SqlError> =>
      Effect.suspend(() =>
        handle.inTransaction
          ? semaphore.withPermits(1)(Effect.suspend(() => (handle.inTransaction ? Effect.fail(busy) : runNow(body, begin, end))))
          : runNow(body, begin, end)
      )

    const sql = yield* makeClient(handle, semaphore)
    return {
      filename,
      read: operation(undefined, ""),
      readConsistent: operation("BEGIN", "COMMIT"),
      write: operation("BEGIN IMMEDIATE", "COMMIT"),
      sql
    }
  })

/**
 * The @effect/sql client over the handle: statements and transactions take its semaphore. Its
 * statements are prepared afresh each time (they are not on a hot path, and any SQL may come).
 */
const makeClient = (handle: Sqlite.Database, semaphore: Effect.Semaphore): Effect.Effect<SqlClient.SqlClient> => {
  const rows = (statement: Sqlite.Statement, params: ReadonlyArray<unknown>, raw: boolean): unknown =>
    statement.reader ? statement.all(...params) : raw ? statement.run(...params) : (statement.run(...params), [])
  const execute = (prepare: () => Sqlite.Statement, params: ReadonlyArray<unknown>, raw: boolean) =>
    Effect.suspend(() => {
      const result = attempt(() => rows(prepare(), params, raw))
      return Either.isLeft(result) ? failure(result.left, "Failed to execute statement") : Effect.succeed(result.right)
    })
  const asRows = (result: unknown): ReadonlyArray<object> => (Array.isArray(result) ? result : [])
  const statementRows: Connection["execute"] = (sql, params, transformRows) =>
    Effect.map(execute(() => handle.prepare(sql), params, false), (result) => (transformRows ? transformRows(asRows(result)) : asRows(result)))
  const connection: Connection = {
    execute: statementRows,
    executeUnprepared: statementRows,
    executeRaw: (sql, params) => execute(() => handle.prepare(sql), params, true),
    executeValues: (sql, params) =>
      Effect.suspend(() => {
        const result = attempt(() => {
          const statement = handle.prepare(sql)
          return statement.reader ? (statement.raw(true).all(...params) as ReadonlyArray<ReadonlyArray<unknown>>) : (statement.run(...params), [])
        })
        return Either.isLeft(result) ? failure(result.left, "Failed to execute statement") : Effect.succeed(result.right)
      }),
    executeStream: () => Stream.fail(new SqlError({ message: "streaming rows is not supported by the store's connection" }))
  }
  return SqlClient.make({
    acquirer: semaphore.withPermits(1)(Effect.succeed(connection)),
    transactionAcquirer: Effect.uninterruptibleMask((restore) =>
      Effect.as(
        Effect.zipRight(restore(semaphore.take(1)), Effect.tap(Effect.scope, (scope) => Scope.addFinalizer(scope, semaphore.release(1)))),
        connection
      )
    ),
    compiler: Statement.makeCompilerSqlite(),
    spanAttributes: [["db.system.name", "sqlite"]],
    beginTransaction: "BEGIN IMMEDIATE"
  }).pipe(Effect.provideServiceEffect(Reactivity.Reactivity, Reactivity.make))
}
