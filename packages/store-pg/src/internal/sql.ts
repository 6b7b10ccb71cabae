/**
 * Statements on a connection of the pool, with parameters of any type `pg` sends (arrays for
 * `unnest` and `= ANY`), and transactions that are never left open.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, type Scope } from "effect"

/**
 * A connection of the pool until the scope closes. Taking it is uninterruptible: @effect/sql-pg
 * 0.53 cannot call off a wait for a pooled connection, so a fiber interrupted while it waited
 * would be handed the connection later and never give it back (the pool then runs dry).
 */
export const reserve = (sql: SqlClient.SqlClient): Effect.Effect<Connection, SqlError, Scope.Scope> => Effect.uninterruptible(sql.reserve)

/** Rows as objects, one statement on a connection taken from the pool for it. */
export const rows = (
  sql: SqlClient.SqlClient,
  text: string,
  params: ReadonlyArray<unknown>
): Effect.Effect<ReadonlyArray<unknown>, SqlError> => Effect.scoped(Effect.flatMap(reserve(sql), (conn) => conn.execute(text, params, undefined)))

/** Rows as arrays of column values, in the statement's column order. */
export const values = (
  sql: SqlClient.SqlClient,
  text: string,
  params: ReadonlyArray<unknown>
): Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>, SqlError> =>
  Effect.scoped(Effect.flatMap(reserve(sql), (conn) => conn.executeValues(text, params)))

/**
 * Run `body` in a transaction on a connection of its own: commits on success, rolls back on
 * failure; uninterruptible, so a transaction is never cut in the middle or left open. A failed
 * COMMIT needs no ROLLBACK: Postgres has ended the transaction, or the connection is gone.
 */
export const transaction = <A, E>(
  sql: SqlClient.SqlClient,
  body: (conn: Connection) => Effect.Effect<A, E>
): Effect.Effect<A, E | SqlError> =>
  Effect.uninterruptible(Effect.scoped(Effect.gen(function*() {
    const conn = yield* reserve(sql)
    yield* conn.execute("BEGIN", [], undefined)
    const value = yield* Effect.onError(body(conn), () => Effect.ignore(conn.execute("ROLLBACK", [], undefined)))
    yield* conn.execute("COMMIT", [], undefined)
    return value
  })))

/** A column of a result row. */
export const field = (row: unknown, key: string): unknown =>
  typeof row === "object" && row !== null ? (row as Record<string, unknown>)[key] : undefined
