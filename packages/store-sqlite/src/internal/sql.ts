/**
 * Helpers over an @effect/sql connection, for opening a file (checks, pragmas, migrations) before
 * a store uses it; the store's own operations go through `database.ts`.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit } from "effect"

/** The client's connection (SQLite clients have one). */
export const connection = (client: SqlClient.SqlClient): Effect.Effect<Connection, SqlError> =>
  Effect.scoped(client.reserve)

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
