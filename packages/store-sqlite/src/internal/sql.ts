/** Small helpers over one @effect/sql connection: atomic operations, `BEGIN IMMEDIATE`, rows. */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit } from "effect"

/**
 * The client's single connection. better-sqlite3 runs every statement synchronously, so the
 * store runs each operation (a read, or a whole append transaction) to completion in one
 * synchronous step with `atomically`: no other fiber can run a statement in between, which is
 * what the client's per-operation reservation (a scope, a permit, a finalizer: ~23 µs here)
 * would otherwise buy.
 */
export const connection = (client: SqlClient.SqlClient): Effect.Effect<Connection, SqlError> =>
  Effect.scoped(client.reserve)

/**
 * Run a synchronous Effect to its end at once, so no other fiber interleaves. `effect` must not
 * suspend (every statement on better-sqlite3 is synchronous); if it did, that is a defect.
 */
export const atomically = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.suspend(() => Effect.runSyncExit(effect))

/** A statement through the client's prepared-statement cache. */
export const query = (
  conn: Connection,
  sql: string,
  params: ReadonlyArray<unknown> = []
): Effect.Effect<ReadonlyArray<unknown>, SqlError> => conn.execute(sql, params, undefined)

/**
 * Run `body` in a `BEGIN IMMEDIATE` transaction: the write lock is taken first (waiting up to
 * the busy timeout), so two writers never both read the same log end. Commits on success,
 * rolls back on failure; uninterruptible, so a transaction is never left open.
 */
export const immediate = <A, E, R>(
  conn: Connection,
  body: Effect.Effect<A, E, R>
): Effect.Effect<A, E | SqlError, R> =>
  Effect.uninterruptible(Effect.gen(function*() {
    yield* conn.execute("BEGIN IMMEDIATE", [], undefined)
    const exit = yield* Effect.exit(body)
    if (Exit.isSuccess(exit)) {
      const committed = yield* Effect.exit(conn.execute("COMMIT", [], undefined))
      if (Exit.isSuccess(committed)) return exit.value
      // A failed COMMIT may leave the transaction open (or SQLite may have rolled it back).
      yield* Effect.ignore(conn.execute("ROLLBACK", [], undefined))
      return yield* Effect.failCause(committed.cause)
    }
    yield* Effect.ignore(conn.execute("ROLLBACK", [], undefined))
    return yield* exit
  }))

/** A column of a result row. */
export const field = (row: unknown, key: string): unknown =>
  typeof row === "object" && row !== null ? (row as Record<string, unknown>)[key] : undefined
